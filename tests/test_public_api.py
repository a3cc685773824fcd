"""The public names: every package's __all__ resolves, and a family's lazy names stay lazy (jobs import only
the method they run)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

PACKAGES = [
    "uqcal",
    "uqcal.metrics",
    "uqcal.core.calibration",
    "uqcal.methods.metareg.gmm_cdf",
    "uqcal.methods.qr.entropy",
    "uqcal.core.gp",
    "uqcal.data",
    "uqcal.data.sources",
    "uqcal.pipeline.report",
    "uqcal.pipeline.steps",
    "uqcal.methods",
    "uqcal.methods.reference_predictors",
    *(f"uqcal.methods.{family}" for family in ("metareg", "rio", "qr", "fewshot", "bo")),
]


@pytest.mark.parametrize("name", PACKAGES)
def test_every_public_name_resolves(name):
    module = importlib.import_module(name)
    assert isinstance(module.__all__, list) and len(set(module.__all__)) == len(module.__all__)
    for public in module.__all__:
        if name == "uqcal.methods":  # the family subpackages
            importlib.import_module(f"{name}.{public}")
        else:
            assert getattr(module, public) is not None, f"{name}.{public}"
    is_family = name.startswith("uqcal.methods.") and name.count(".") == 2 and name != "uqcal.methods.reference_predictors"
    if is_family:
        assert "METHODS" in module.__all__ and set(module.__all__) <= set(dir(module))
        with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
            module.not_a_name  # noqa: B018


def test_a_family_imports_no_method_module_until_a_name_is_used():
    code = (
        "import sys, uqcal.methods.rio, uqcal.methods.qr, uqcal.methods.bo, uqcal.pipeline.report\n"
        "print(sorted(m for m in sys.modules if m.startswith(('uqcal.methods.rio.', 'uqcal.methods.qr.', "
        "'uqcal.methods.bo.', 'uqcal.pipeline.report.')) or m in ('torch', 'matplotlib')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_data_package_imports_nothing_heavy_until_a_name_is_used():
    code = "import sys, uqcal.data.errors; assert 'pandas' not in sys.modules, 'pandas'"
    subprocess.run([sys.executable, "-c", code], check=True)
