"""The preflight's client side: its settings from the typed config (`settings`); what it runs and how it is judged
live in incluster/preflight/."""
