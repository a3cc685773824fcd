"""The train step loads its method with Python's cyclic collector paused, then freezes what it loaded
(``uqcal.pipeline.steps.train.imports_uncollected``): only in a process of its own, and with no number changed."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO, run, tool_env
from uqcal.pipeline.config.load import load_config
from uqcal.pipeline.config.runs import iter_batches

SMOKE = "config/smoke.yaml"

PROGRAM = textwrap.dedent("""
    import gc, types
    from uqcal.pipeline.steps.train import imports_uncollected
    for own_process in (False, True):
        frozen = gc.get_freeze_count()
        with imports_uncollected(types.SimpleNamespace(own_process=own_process)):
            paused = not gc.isenabled()
            import pandas  # a few hundred thousand tracked objects, loaded inside the block
        print(own_process, paused, gc.isenabled(), gc.get_freeze_count() - frozen)
""")


def test_the_collector_pauses_and_freezes_the_imports_only_in_a_process_of_its_own():
    proc = subprocess.run([sys.executable, "-c", PROGRAM], cwd=REPO, env=tool_env(), capture_output=True, text=True,
                          timeout=300, check=True)
    caller, own = (line.split() for line in proc.stdout.strip().splitlines())
    assert caller == ["False", "False", "True", "0"]  # a caller's process (tests, notebooks): untouched
    assert own[:3] == ["True", "True", "True"]  # paused inside, collecting again after
    assert int(own[3]) > 10_000  # pandas' objects (and everything before them) left out of later collections


@pytest.mark.slow
def test_a_train_job_writes_the_same_bytes_with_the_collector_paused_or_not(smoke_run, tmp_path):
    # The smoke run's jobs ran as `uqcal train` (the collector paused while they loaded); here the same job runs
    # through main(argv), which leaves the collector as Python starts it.
    config = load_config(smoke_run / SMOKE)
    batch = next(b for b in iter_batches(config, ["metareg"]) if b.method == "metacal")
    results = tmp_path / "results"
    program = "import sys; from uqcal.cli import main; sys.exit(main(sys.argv[1:]))"
    run([sys.executable, "-c", program, "--results-dir", str(results), "train", "--config", SMOKE, "--family",
         "metareg", "--dataset", batch.dataset, "--setting", batch.setting, "--method", batch.method], smoke_run)
    for r in batch.runs:
        for name in ("metrics.json", "model.pt", "predictions.parquet"):
            paused = (smoke_run / r.run_dir / name).read_bytes()
            default = (results / Path(r.run_dir).relative_to("results") / name).read_bytes()
            assert paused == default, f"{r.run_dir}/{name}"
