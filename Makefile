# Command 1: make reproduce   (fresh venv, install, run the default reproduction end to end)
# Command 2: make test        (fresh venv, install, run the test suite)
PYTHON ?= python3
VENV ?= .venv
CORES ?= all
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
# The environment lock (`make lock`): requirements.lock pins every package but torch, with hashes; torch's build
# is pinned on its own in requirements-torch-$(TORCH).lock (cpu: 2.13.0+cpu), installed first by its own line,
# so that another build can be swapped in without touching the rest of the lock.
TORCH ?= cpu
TORCH_LOCK := requirements-torch-$(TORCH).lock
LOCK := requirements.lock
# `make lock` resolves with pip-tools (pip's own resolver and index view, so `pip install` finds every pin).
LOCK_VENV ?= .venv-lock
PIP_TOOLS ?= pip-tools==7.6.2
UPGRADE ?=
COMPILE = CUSTOM_COMPILE_COMMAND="make lock" $(LOCK_VENV)/bin/pip-compile -q --generate-hashes --strip-extras --no-emit-index-url --no-emit-find-links \
	$(if $(UPGRADE),--upgrade)

.PHONY: venv reproduce smoke test docs lint lock clean pull

$(BIN)/uqcal: pyproject.toml $(LOCK) $(TORCH_LOCK)
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip
	# torch first, the locked build (a looser pin would pull several GB of CUDA wheels); then the lock, which
	# it satisfies; then uqcal itself without resolving anything.
	$(PIP) install -r $(TORCH_LOCK)
	$(PIP) install -r $(LOCK)
	$(PIP) install --no-deps -e .
	$(PIP) check
	touch $(BIN)/uqcal

venv: $(BIN)/uqcal

# Refresh the lock after a change to pyproject.toml's dependencies or requirements-torch-*.in (pins that still fit
# are kept), or `make lock UPGRADE=1` to move every package to its newest release within pyproject's ranges.
lock:
	test -x $(LOCK_VENV)/bin/pip-compile || { $(PYTHON) -m venv $(LOCK_VENV) && $(LOCK_VENV)/bin/python -m pip install -q "$(PIP_TOOLS)"; }
	$(COMPILE) --unsafe-package torch --extra test --extra docs -o $(LOCK) pyproject.toml requirements-torch-$(TORCH).in
	$(COMPILE) --allow-unsafe -c $(LOCK) -o $(TORCH_LOCK) requirements-torch-$(TORCH).in

reproduce: venv
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/snakemake --cores $(CORES)

smoke: venv
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/snakemake --cores $(CORES) --configfile config/smoke.yaml

test: venv
	PATH="$(CURDIR)/$(BIN):$$PATH" UQCAL_LOCKED_ENV=1 $(BIN)/python -m pytest -q

# The documentation site (mkdocs.yml, docs/) into site/; any warning fails the build.
docs: venv
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# In a fresh clone: fetch the results (and their job records) that the committed dvc.lock names.
pull: venv
	@test -f dvc.lock || { echo "no dvc.lock: the run to pull was not committed (README, DVC)"; exit 1; }
	$(BIN)/dvc pull

lint: venv
	$(BIN)/ruff check src tests benchmarks

clean:
	rm -rf results reports/*.html reports/*/ logs .snakemake site
