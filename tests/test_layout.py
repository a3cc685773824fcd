"""The source tree is its layers (docs/ARCHITECTURE.md): few entries at the top, old module paths still import."""

import importlib
import sys
import warnings
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "uqcal"


def test_the_top_of_the_package_names_the_layers():
    entries = sorted(p.name for p in SRC.iterdir() if p.name != "__pycache__")
    assert len(entries) <= 8, entries
    assert {"cli", "pipeline", "methods", "data", "metrics", "core"} <= set(entries)


@pytest.mark.parametrize(("old", "new"), [
    ("uqcal.calibration", "uqcal.core.calibration"),
    ("uqcal.calibration_gmm", "uqcal.methods.metareg.gmm_cdf"),
    ("uqcal.calibration_entropy", "uqcal.methods.qr.entropy"),
    ("uqcal.gp.linalg", "uqcal.core.gp.linalg"),
    ("uqcal.stats", "uqcal.metrics.stats"),
])
def test_a_moved_module_still_imports_from_its_old_path(old, new):
    imported_before = old in sys.modules
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    if not imported_before:
        assert any(issubclass(w.category, DeprecationWarning) and "moved to uqcal." in str(w.message) for w in caught)


def test_the_architecture_page_opens_with_the_tree_as_it_is():
    text = (SRC.parents[1] / "docs" / "ARCHITECTURE.md").read_text()
    block = text.split("## Source tree", 1)[1].split("```", 2)[1]
    documented = [line.split()[0] for line in block.strip().splitlines()]
    root = SRC.parents[1]
    actual = sorted(
        p.relative_to(root).as_posix()
        for p in [SRC, *SRC.iterdir(), *(q for d in SRC.iterdir() if d.is_dir() for q in d.iterdir())]
        if "__pycache__" not in p.parts
    )
    assert documented == actual
