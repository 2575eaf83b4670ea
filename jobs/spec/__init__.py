"""The job spec: the run and its hash, the derived defaults, the validation against verl's and NeMo-RL's own config, the memory model."""
