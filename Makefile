# grpo-gke: the two everyday commands are `make plan` and `make test`.
PYTHON ?= python3
STACK ?= dev
VENV := .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed
INSTALLED_TEST := $(VENV)/.installed-test

.PHONY: plan demo test bench clean

UV_VERSION := 0.13.8
PIP := $(PY) -m pip install --quiet --disable-pip-version-check
UV := $(VENV)/bin/uv pip install --quiet --python $(PY)

# The venv is (re)built when missing or when a requirements file changed. uv (installed from PyPI
# into the venv) installs the same exact pins as pip in a fraction of its time; where uv cannot be
# installed or fails, pip installs them.
$(INSTALLED): requirements.txt requirements-verl.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) uv==$(UV_VERSION) && $(UV) -r requirements.txt && $(UV) --no-deps -r requirements-verl.txt \
		|| { echo "uv could not install the pins: installing them with pip"; $(PIP) -r requirements.txt && $(PIP) --no-deps -r requirements-verl.txt; }
	touch $(INSTALLED)

# The tests also need torch (PyPI's wheel, run on the CPU), which `make plan` never installs. pip, not uv: only
# pip takes a machine's local torch wheel (PIP_FIND_LINKS); without one, PyPI's Linux x86_64 wheel is the CUDA
# build (4.5 GB with its nvidia-* wheels: README.md, Quick start).
$(INSTALLED_TEST): $(INSTALLED) requirements-test.txt
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-test.txt
	touch $(INSTALLED_TEST)

plan: $(INSTALLED)  ## Render the $(STACK) stack offline into build/$(STACK)/; AGAINST=DIR: what `pulumi up` would change since the plan in DIR
	$(PY) -m plan --stack $(STACK) $(if $(AGAINST),--against $(AGAINST))

demo: $(INSTALLED)  ## The whole run lifecycle offline on a local Ray cluster: submit, lose a GPU node, resume, status, plot
	$(PY) -m jobs.demo

# The suite keeps compiled modules under build/.cache/pycache even where PYTHONDONTWRITEBYTECODE is set (see
# tests/__init__.py); set here too, pytest's own modules and lint-imports' are kept before tests/ is imported.
test: export PYTHONPYCACHEPREFIX := $(CURDIR)/build/.cache/pycache
test: export PYTHONDONTWRITEBYTECODE :=
test: $(INSTALLED_TEST)  ## The import contracts (pyproject.toml), ruff's lint and format check, the control plane's build, then the whole test suite
	@if command -v go >/dev/null; then controlplane/build.sh; \
	else echo "go is not on PATH: the tests on a real control plane (tests/controlplane) will be skipped"; fi
	$(VENV)/bin/lint-imports
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m pytest -n 2

bench: $(INSTALLED)  ## Speed targets: offline plan and job submission
	$(PY) benchmarks/run.py

clean:
	rm -rf build .pytest_cache
