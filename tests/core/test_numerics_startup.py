"""Start-up cost of the portable numerics (issue 53): `configure_torch` sets deterministic algorithms without
importing torch._dynamo (1.5-2 CPU s a process), so a module that steps a torch optimiser imports torch._dynamo
itself, before any timer: an optimiser's first step imports it (torch/optim/optimizer.py, ``_use_grad``), and the
import would otherwise land in the first timed training or prediction (train_seconds, predict_seconds_per_task;
metareg's short_inference_time claim compares the latter)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "uqcal"

FIRST_STEP = """
import sys, torch
before = "torch._dynamo" in sys.modules
weight = torch.nn.Parameter(torch.ones(2))
optimiser = torch.optim.Adam([weight], lr=0.1)
weight.sum().backward()
optimiser.step()
print(before, "torch._dynamo" in sys.modules)
"""


def test_an_optimisers_first_step_imports_dynamo():
    """The upstream behaviour the rule below is for: if torch stops importing torch._dynamo in a step, the
    up-front imports are dead weight (and this test says so)."""
    out = subprocess.run([sys.executable, "-c", FIRST_STEP], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]


def _uses_torch_optim(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "optim" and isinstance(node.value, ast.Name) \
                and node.value.id == "torch":
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("torch.optim"):
            return True
        if isinstance(node, ast.ImportFrom) and node.module == "torch" and any(a.name == "optim" for a in node.names):
            return True
    return False


def _imports_dynamo(tree: ast.Module) -> bool:
    return any(isinstance(node, ast.Import) and any(a.name == "torch._dynamo" for a in node.names)
               for node in ast.walk(tree))


def test_every_module_that_builds_a_torch_optimiser_imports_dynamo_up_front():
    users = {}
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        if _uses_torch_optim(tree):
            users[path.relative_to(SRC).as_posix()] = _imports_dynamo(tree)
    assert "methods/metareg/neural.py" in users  # the scan finds the optimiser users (SQR's per-task training)
    missing = sorted(name for name, imports in users.items() if not imports)
    assert not missing, f"build a torch optimiser without importing torch._dynamo up front: {missing}"


def test_a_method_module_that_steps_an_optimiser_brings_dynamo_and_an_isotonic_one_does_not():
    code = ("import sys, importlib; importlib.import_module(sys.argv[1]); "
            "print('torch._dynamo' in sys.modules)")
    def loaded(module: str) -> str:
        return subprocess.run([sys.executable, "-c", code, module], capture_output=True, text=True,
                              check=True).stdout.strip()
    assert loaded("uqcal.methods.metareg.neural") == "True"
    assert loaded("uqcal.methods.qr.isotonic") == "False"
