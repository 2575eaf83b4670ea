"""The one typed stack config, checked before any resource exists: the model (model.py), the problem
type and its messages (problems.py), the cross-rules' registry (rules.py) and the loading (load.py)."""
