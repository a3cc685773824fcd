# Command 1: make reproduce   (fresh venv, install, run the default reproduction end to end)
# Command 2: make test        (fresh venv, install, run the test suite)
PYTHON ?= python3
VENV ?= .venv
CORES ?= all
BIN := $(VENV)/bin

.PHONY: venv reproduce smoke test lint clean pull

$(BIN)/uqcal: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	# torch==2.13.0 is the CPU build; a looser pin would pull several GB of CUDA wheels.
	$(BIN)/python -m pip install "torch==2.13.0"
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
