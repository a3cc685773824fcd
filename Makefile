# Command 1: make reproduce   (fresh venv, install, run the default reproduction end to end)
# Command 2: make test        (fresh venv, install, run the test suite)
PYTHON ?= python3
VENV ?= .venv
CORES ?= all
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
# Which torch build the venv gets (README, "CPU or GPU: which torch"):
#   TORCH=cpu   (default) the hash-locked CPU build, requirements-torch-cpu.lock (2.13.0+cpu): what `make test`,
#               `make reproduce` and CI install. Where pip does not find the +cpu wheel by itself, name
#               PyTorch's CPU index: TORCH_INDEX=<CPU index URL>.
#   TORCH=cuda  the same version's CUDA build from PyTorch's CUDA index (TORCH_INDEX overrides it: another CUDA
#               version or a mirror); not hash-locked (its wheels depend on the CUDA version), the rest of the
#               environment is. GPU machines and the GPU nodes of a SLURM run (the cluster's jobs use this venv).
TORCH ?= cpu
ifeq ($(filter $(TORCH),cpu cuda),)
$(error TORCH=$(TORCH): expected cpu or cuda)
endif
TORCH_VERSION := 2.13.0
TORCH_INDEX_cuda := https://download.pytorch.org/whl/cu128
TORCH_INDEX ?= $(TORCH_INDEX_$(TORCH))
ifeq ($(TORCH),cpu)
TORCH_LOCK := requirements-torch-cpu.lock
TORCH_INSTALL = $(PIP) install -r $(TORCH_LOCK)$(if $(TORCH_INDEX), --extra-index-url $(TORCH_INDEX))
else
TORCH_LOCK :=
TORCH_INSTALL = $(PIP) install "torch==$(TORCH_VERSION)" --index-url $(TORCH_INDEX)
endif
# The venv records its torch build; asking for the other one rebuilds it.
TORCH_STAMP := $(VENV)/.torch-$(TORCH)
LOCK := requirements.lock
# `make lock` resolves with pip-tools (pip's own resolver and index view, so `pip install` finds every pin).
LOCK_VENV ?= .venv-lock
PIP_TOOLS ?= pip-tools==7.6.2
UPGRADE ?=
COMPILE = CUSTOM_COMPILE_COMMAND="make lock" $(LOCK_VENV)/bin/pip-compile -q --generate-hashes --strip-extras --no-emit-index-url --no-emit-find-links \
	$(if $(UPGRADE),--upgrade)

.PHONY: venv reproduce smoke numerics-check arena test docs lint lock clean pull FORCE

$(BIN)/uqcal: pyproject.toml $(LOCK) $(TORCH_LOCK) $(if $(wildcard $(TORCH_STAMP)),,FORCE)
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip
	# torch first, the build TORCH names (a looser pin would pull several GB of CUDA wheels); then the lock, which
	# it satisfies; then uqcal itself without resolving anything.
	$(TORCH_INSTALL)
	$(PIP) install -r $(LOCK)
	$(PIP) install --no-deps -e .
	$(PIP) check
	touch $(TORCH_STAMP) $(BIN)/uqcal

FORCE:

venv: $(BIN)/uqcal

# Refresh the lock after a change to pyproject.toml's dependencies or requirements-torch-*.in (pins that still fit
# are kept), or `make lock UPGRADE=1` to move every package to its newest release within pyproject's ranges.
# The lock holds every extra (methods, plots, pipeline, test, docs): `make venv` installs everything; a plain
# `pip install .` gets only the base (numpy, scipy, pandas, scikit-learn; .ci/light_install).
lock:
	test -x $(LOCK_VENV)/bin/pip-compile || { $(PYTHON) -m venv $(LOCK_VENV) && $(LOCK_VENV)/bin/python -m pip install -q "$(PIP_TOOLS)"; }
	$(COMPILE) --unsafe-package torch --extra methods --extra plots --extra pipeline --extra test --extra docs -o $(LOCK) pyproject.toml requirements-torch-cpu.in
	$(COMPILE) --allow-unsafe -c $(LOCK) -o requirements-torch-cpu.lock requirements-torch-cpu.in

# Each run first validates its raw config file (plain YAML, schema, datasets, methods), before Snakemake reads it:
# Snakemake would evaluate a YTE template (`__use_yte__`) in the file, running its Python, while loading it.
RUN = $(BIN)/uqcal validate-config --config $(1) && PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/snakemake --cores $(CORES)

reproduce: venv
	$(call RUN,config/config.yaml)

smoke: venv
	$(call RUN,config/smoke.yaml) --configfile config/smoke.yaml

# The same numbers on this CPU as on the machine that wrote the fingerprint (docs/pipeline.md, "Numerics"):
# config/smoke.yaml in a throwaway copy of the source, every family's non-timing results compared exactly.
numerics-check: venv
	$(BIN)/python -m uqcal.pipeline.fingerprint smoke tests/fixtures/numerics/smoke-fingerprint.json

# The arena's leaderboard across the regression families (docs/arena.md): its own config, not the default run.
arena: venv
	$(call RUN,config/arena.yaml) --configfile config/arena.yaml

# TEST_WORKERS: pytest-xdist processes (0: one process). Two halve the wall time on two cores: most of the end-to-end
# tests' time is spent waiting on Snakemake and DVC subprocesses; each worker runs the smoke pipeline once.
TEST_WORKERS ?= 2
test: venv
	PATH="$(CURDIR)/$(BIN):$$PATH" UQCAL_LOCKED_ENV=1 $(BIN)/python -m pytest -q -n $(TEST_WORKERS)

# The documentation site (mkdocs.yml, docs/) into site/; any warning fails the build.
docs: venv
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# In a fresh clone: fetch the results (and their job records) that the committed dvc.lock names.
pull: venv
	@test -f dvc.lock || { echo "no dvc.lock: the run to pull was not committed (README, DVC)"; exit 1; }
	$(BIN)/dvc pull

# ruff, then the layering contracts of pyproject.toml [tool.importlinter] (docs/ARCHITECTURE.md).
lint: venv
	$(BIN)/ruff check src tests benchmarks docs/experiments
	$(BIN)/lint-imports

clean:
	rm -rf results reports/*.html reports/*/ logs .snakemake site
