# grpo-gke: the two everyday commands are `make plan` and `make test`.
PYTHON ?= python3
STACK ?= dev
VENV := .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed
INSTALLED_TEST := $(VENV)/.installed-test

.PHONY: plan test bench clean

# The venv is (re)built when missing or when a requirements file changed.
$(INSTALLED): requirements.txt requirements-verl.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -r requirements-verl.txt
	touch $(INSTALLED)

# The tests also need torch (the CPU wheel), which `make plan` never installs.
$(INSTALLED_TEST): $(INSTALLED) requirements-test.txt
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-test.txt
	touch $(INSTALLED_TEST)

plan: $(INSTALLED)  ## Render the $(STACK) stack offline into build/$(STACK)/
	$(PY) -m plan --stack $(STACK)

test: $(INSTALLED_TEST)  ## The layering contract (pyproject.toml), ruff, then the whole test suite
	$(VENV)/bin/lint-imports
	$(VENV)/bin/ruff check .
	$(PY) -m pytest

bench: $(INSTALLED)  ## Speed targets: offline plan and job submission
	$(PY) benchmarks/run.py

clean:
	rm -rf build .pytest_cache
