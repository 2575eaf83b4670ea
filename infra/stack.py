"""Builds the Google Cloud graph of the stack (placeholder until the infra components land)."""
