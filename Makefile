# Command 1: make reproduce   (fresh venv, install, run the default reproduction end to end)
# Command 2: make test        (fresh venv, install, run the test suite)
PYTHON ?= python3
VENV ?= .venv
CORES ?= all
BIN := $(VENV)/bin
# Which torch build the venv gets (README, "CPU or GPU"):
#   TORCH=cpu   (default) the pinned torch as pip resolves it with no index named: what `make test`,
#               `make reproduce` and CI install. TORCH_INDEX=<CPU index> names PyTorch's CPU-only wheels.
#   TORCH=cuda  the same version's CUDA build from PyTorch's CUDA wheel index: GPU machines and the GPU
#               nodes of a SLURM run (the cluster's jobs use this venv). TORCH_INDEX=<index> picks another
#               CUDA version or a mirror.
TORCH ?= cpu
TORCH_VERSION := 2.13.0
TORCH_INDEX_cuda := https://download.pytorch.org/whl/cu128
TORCH_INDEX ?= $(TORCH_INDEX_$(TORCH))
ifeq ($(filter $(TORCH),cpu cuda),)
$(error TORCH=$(TORCH): expected cpu or cuda)
endif
TORCH_STAMP := $(VENV)/.torch-$(TORCH)

.PHONY: venv reproduce smoke test lint clean pull

# The torch build, recorded by a stamp: asking for the other build reinstalls torch (pip counts the CUDA
# build 2.13.0+cu128 as satisfying ==2.13.0, so the old one is uninstalled first).
$(TORCH_STAMP):
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	if ls $(VENV)/.torch-* >/dev/null 2>&1; then $(BIN)/python -m pip uninstall -y torch; fi
	$(BIN)/python -m pip install "torch==$(TORCH_VERSION)"$(if $(TORCH_INDEX), --index-url $(TORCH_INDEX))
	rm -f $(VENV)/.torch-*
	touch $@

$(BIN)/uqcal: pyproject.toml $(TORCH_STAMP)
	$(BIN)/python -m pip install -e ".[test]"
	touch $(BIN)/uqcal

venv: $(BIN)/uqcal

reproduce: venv
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/snakemake --cores $(CORES)

smoke: venv
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/snakemake --cores $(CORES) --configfile config/smoke.yaml

test: venv
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -q

# In a fresh clone: fetch the results (and their job records) that the committed dvc.lock names.
pull: venv
	@test -f dvc.lock || { echo "no dvc.lock: the run to pull was not committed (README, DVC)"; exit 1; }
	$(BIN)/dvc pull

lint: venv
	$(BIN)/ruff check src tests benchmarks

clean:
	rm -rf results reports/*.html reports/*/ logs .snakemake
