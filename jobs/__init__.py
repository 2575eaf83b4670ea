"""GRPO job specs, their validation, the post-deploy submission and the job CLI."""
