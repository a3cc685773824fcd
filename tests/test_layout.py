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
