"""`make demo` (`python -m jobs.demo`): the whole run lifecycle on this machine, offline, in under two minutes."""
