"""What runs inside the cluster: the attempt wrapper, the checkpoint check, the run's record, the export driver, the
run guardian's loop and hooks, the preflight's driver and measurements, the deadline rule.

It ships whole (incluster/shipping.py) into the framework images, which have their own Python and no Pulumi or
typed config, so it imports only the standard library, Ray, requests, PyYAML, torch (the preflight's GPU tasks) and
core's two pure modules (core.names, core.facts), in the syntax of the oldest image's Python
(core/facts/platform.py OLDEST_IMAGE_PYTHON). pyproject.toml's import contracts and ruff's target version hold it.
"""
