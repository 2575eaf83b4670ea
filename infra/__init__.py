"""Google Cloud resources of the grpo-gke stack, its typed config and the offline plan."""
