"""The run guardian's Kubernetes objects and settings, and its foreground command; its loop is incluster/guardian/."""
