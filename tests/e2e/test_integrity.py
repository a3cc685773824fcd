"""Issue 49, item 4: a failed integrity check fails the run, the aggregate never reads a result that is not what
its job wrote, and the advice printed works as written."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest

from tests.conftest import BIN, run, snakemake

pytestmark = pytest.mark.slow

SMOKE = "config/smoke.yaml"
VICTIM = "results/rio/concrete/holdout/nn/seed0/metrics.json"
SUMMARY = "results/rio/summary.csv"


def _tamper(root: Path) -> bytes:
    """One digit of a metrics.json, same size (Snakemake compares sizes only); returns the original bytes."""
    original = (root / VICTIM).read_bytes()
    text = original.decode()
    digit = re.search(r'"rmse": \d+\.\d*?(\d)', text)
    edited = text[:digit.start(1)] + str((int(digit.group(1)) + 1) % 10) + text[digit.end(1):]
    assert len(edited) == len(text) and edited != text
    (root / VICTIM).write_text(edited)
    return original


def _rows(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if "second" not in line]  # timings are wall clock


def test_a_tampered_result_fails_the_run_never_reaches_the_summary_and_the_advice_restores_it(smoke_run, tmp_path):
    root = tmp_path / "tampered"
    shutil.copytree(smoke_run, root, symlinks=True)
    original, summary = _tamper(root), _rows(root / SUMMARY)
    lock = (root / "dvc.lock").read_bytes()

    # A run that reads nothing of rio's (metareg's aggregate again): its DVC commit refuses the file, and the run
    # fails. (A run with nothing to do at all ends before Snakemake's onsuccess: it commits nothing either.)
    proc = snakemake(["results/metareg/summary.csv", "--cores", "1", "--configfile", SMOKE, "--forcerun",
                      "results/metareg/summary.csv"], root, check=False)
    assert proc.returncode != 0, proc.stderr[-3000:]
    assert "refusing to dvc commit" in proc.stderr and VICTIM in proc.stderr, proc.stderr[-3000:]
    assert (root / "dvc.lock").read_bytes() == lock

    # The aggregate run again: it refuses to read the file, and no summary is built from it.
    proc = snakemake(["--cores", "1", "--configfile", SMOKE, "--forcerun", SUMMARY], root, check=False)
    assert proc.returncode != 0
    log = (root / "logs/aggregate/rio.log").read_text()
    assert "refusing to run aggregate rio" in log and VICTIM in log, log[-3000:]
    assert not (root / SUMMARY).exists() or _rows(root / SUMMARY) == summary

    # The advice, as printed.
    advice = re.search(r"`(dvc checkout --force [^`]+)`", log).group(1)
    run([str(BIN / "dvc"), *shlex.split(advice)[1:]], root)
    assert (root / VICTIM).read_bytes() == original
    snakemake(["--cores", "1", "--configfile", SMOKE], root, timeout=900)
    assert _rows(root / SUMMARY) == summary
