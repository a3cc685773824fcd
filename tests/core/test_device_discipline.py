"""Device discipline, checked statically on the CPU: a method's tensors follow ``resolve_device``.

A CUDA run only fails where a CPU tensor meets a CUDA one, which no CPU test can see; so the code that
trains and predicts is scanned instead (``scan``), and ``test_the_scan_reports_every_kind_of_violation``
proves the scan can fail. The rules, one ``kind`` each:

- ``factory``: a tensor factory (``torch.tensor``, ``zeros``, ``arange``, ``randperm``, ``from_numpy`` ...)
  names its device (``device=...``; an explicit ``device="cpu"`` marks a deliberate CPU tensor, e.g. at a
  numpy boundary). Also accepted: the factory is moved in the same expression (``torch.randperm(n,
  generator=g).to(data.device)``; ``.to`` with a device or a tensor, not a dtype alone), or it is handed to
  a module that moves it with itself (``register_buffer``, ``nn.Parameter``). ``*_like`` factories inherit
  their input's device and are never flagged.
- ``numpy``: ``.numpy()`` only on a ``.cpu()`` (or ``.to("cpu")``) in the same chain: on a CUDA tensor
  ``.numpy()`` raises.
- ``generator``: the methods draw from CPU generators on purpose (the same random stream on every device)
  and move the draws: ``torch.Generator(device="cpu")``, and a draw with ``generator=`` is a CPU draw (no
  ``device=`` and moved, or ``device="cpu"``; a CPU generator cannot draw on CUDA).
- ``load``: ``torch.load`` names ``map_location`` (a model saved on a GPU must load on a CPU-only machine).
- ``cuda``: no ``.cuda()`` and no ``torch.device("cuda...")`` literal: the device comes from the config
  through ``resolve_device``.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "uqcal"
# Training and prediction code: the method families, the GP helpers, the recalibrators, the BO objectives
# (botorch test functions), the paper's CNN objective (it trains on the configured device), and what every
# run goes through: RunContext (api), checkpoints (resume) and artifact loading (io).
SCANNED = sorted([
    *(SRC / "methods").rglob("*.py"), *(SRC / "core" / "gp").rglob("*.py"), SRC / "core" / "calibration.py",
    SRC / "core" / "nn.py", SRC / "data" / "objectives.py", SRC / "data" / "sources" / "hpo_paper.py",
    SRC / "core" / "resume.py", SRC / "core" / "io.py",
])

FACTORIES = {
    "tensor", "as_tensor", "from_numpy", "zeros", "ones", "empty", "full", "arange", "range", "linspace",
    "logspace", "eye", "rand", "randn", "randint", "randperm", "normal", "tril_indices", "triu_indices",
    "scalar_tensor", "empty_strided", "sparse_coo_tensor",
    "Tensor", "FloatTensor", "DoubleTensor", "LongTensor", "BoolTensor",  # legacy constructors: always CPU
}
# Attribute names of a dtype (``.to(torch.float64)`` moves nothing).
DTYPES = {
    "float", "float16", "float32", "float64", "double", "half", "bfloat16", "int", "int8", "int16", "int32",
    "int64", "long", "uint8", "bool", "complex64", "complex128",
}
# Chained calls that keep a tensor where it is: ``x.detach().cpu().numpy()`` and ``x.cpu().detach().numpy()``
# are both fine.
PASS_THROUGH = {"detach", "clone", "float", "double", "contiguous", "reshape", "view", "ravel", "flatten",
                "squeeze", "unsqueeze", "numpy"}

# Calls between a factory and its ``.to(device)`` that neither use nor change the device.
SHAPE_ONLY = {"reshape", "view", "unsqueeze", "squeeze", "expand", "flatten", "ravel", "t", "clone",
              "contiguous", "float", "double", "long", "int", "bool", "manual_seed"}

# Files where a rule does not apply, each with its reason. Keep this tiny.
ALLOWED: dict[str, str] = {}


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    kind: str
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: [{self.kind}] {self.text}"


def _is_torch(node: ast.AST, names: set[str]) -> str | None:
    """``torch.<name>`` (or ``th.<name>``) -> name, when ``name`` is in ``names``."""
    if isinstance(node, ast.Attribute) and node.attr in names:
        value = node.value
        if isinstance(value, ast.Name) and value.id in ("torch", "th"):
            return node.attr
    return None


def _keyword(call: ast.Call, name: str) -> ast.keyword | None:
    return next((k for k in call.keywords if k.arg == name), None)


def _moves_to_a_device(call: ast.Call) -> bool:
    """``.to(...)`` with a device: ``device=``, or a first argument that is not a dtype (a device or a tensor)."""
    if _keyword(call, "device") is not None:
        return True
    if not call.args:
        return False
    first = call.args[0]
    return not (isinstance(first, ast.Attribute) and first.attr in DTYPES)


def _is_cpu(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value == "cpu"


def _on_cpu(node: ast.AST) -> bool:
    """The receiver chain of a ``.numpy()`` call passes through ``.cpu()`` / ``.to("cpu")``."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        name = node.func.attr
        if name == "cpu":
            return True
        if name == "to" and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == "cpu":
            return True
        if name not in PASS_THROUGH:
            return False
        node = node.func.value
    return False


def _moved(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """The expression goes on, through indexing and shape-only calls, to a ``.to(<device or tensor>)``."""
    while True:
        parent = parents.get(node)
        if isinstance(parent, ast.Subscript) and parent.value is node:
            node = parent
            continue
        call = parents.get(parent)
        if not (isinstance(parent, ast.Attribute) and isinstance(call, ast.Call) and call.func is parent):
            return False
        if parent.attr == "to" and _moves_to_a_device(call):
            return True
        if parent.attr not in SHAPE_ONLY:
            return False
        node = call


def scan_source(source: str, path: str = "<snippet>") -> list[Violation]:
    tree = ast.parse(source)
    parents: dict[ast.AST, ast.AST] = {}
    for parent in ast.walk(tree):
        for child in ast.iter_child_nodes(parent):
            parents[child] = parent
    lines = source.splitlines()
    found: list[Violation] = []

    def report(node: ast.AST, kind: str) -> None:
        found.append(Violation(path, node.lineno, kind, lines[node.lineno - 1].strip()))

    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        factory = _is_torch(func, FACTORIES)
        device = _keyword(node, "device")
        if factory is not None and _keyword(node, "generator") is not None and device is not None \
                and not _is_cpu(device.value):
            report(node, "generator")
        elif factory is not None and device is None:
            parent = parents.get(node)
            handed_to_module = isinstance(parent, ast.Call) and (
                (isinstance(parent.func, ast.Attribute) and parent.func.attr in ("register_buffer", "Parameter"))
                or (isinstance(parent.func, ast.Name) and parent.func.id == "Parameter"))
            if not (_moved(node, parents) or handed_to_module):
                report(node, "factory")
        elif _is_torch(func, {"Generator"}) and not _is_cpu(device.value if device else
                                                             node.args[0] if node.args else None):
            report(node, "generator")
        elif _is_torch(func, {"load"}) and _keyword(node, "map_location") is None:
            report(node, "load")
        elif _is_torch(func, {"device"}) and node.args and isinstance(node.args[0], ast.Constant) \
                and str(node.args[0].value).startswith("cuda"):
            report(node, "cuda")
        elif isinstance(func, ast.Attribute) and func.attr == "cuda":
            report(node, "cuda")  # x.cuda() (``torch.cuda.is_available()`` is a call of ``is_available``)
        elif isinstance(func, ast.Attribute) and func.attr == "numpy" and not node.args \
                and not _on_cpu(func.value):
            report(node, "numpy")
    return sorted(found, key=lambda v: v.line)


def scan(paths: list[Path] = SCANNED) -> list[Violation]:
    found = []
    for path in paths:
        rel = str(path.relative_to(SRC.parents[1]))
        found += [v for v in scan_source(path.read_text(), rel) if f"{rel}:{v.kind}" not in ALLOWED]
    return found


def test_methods_follow_resolve_device():
    violations = scan()
    assert not violations, "device discipline (see this file's docstring):\n" + "\n".join(map(str, violations))


def test_the_scan_covers_every_family():
    scanned = {p.relative_to(SRC).parts[1] for p in SCANNED if p.relative_to(SRC).parts[0] == "methods"}
    assert {"metareg", "rio", "qr", "fewshot", "bo"} <= scanned


def test_the_scan_reports_every_kind_of_violation():
    snippet = textwrap.dedent("""
        import torch

        def train(x, data, path):
            a = torch.zeros(3)                                      # factory
            b = torch.tensor([1.0, 2.0], dtype=torch.float64)       # factory
            c = torch.from_numpy(data)                              # factory
            d = torch.randperm(5).to(torch.float64)                 # factory: a dtype moves nothing
            d = torch.FloatTensor([1.0])                            # factory: a legacy CPU constructor
            g = torch.Generator()                                   # generator
            g = torch.Generator(device=x.device)                    # generator
            r = torch.rand(3, generator=g, device=x.device)         # generator: a CPU stream drawn on CUDA
            state = torch.load(path)                                # load
            e = x.cuda()                                            # cuda
            f = torch.device("cuda")                                # cuda
            h = x.detach().numpy()                                  # numpy
            return a, b, c, d, g, r, state, e, f, h
    """)
    found = scan_source(snippet)
    kinds = [(v.line, v.kind) for v in found]
    assert kinds == [(5, "factory"), (6, "factory"), (7, "factory"), (8, "factory"), (9, "factory"),
                     (10, "generator"), (11, "generator"), (12, "generator"), (13, "load"), (14, "cuda"),
                     (15, "cuda"), (16, "numpy")], kinds


def test_the_scan_accepts_what_the_rules_allow():
    snippet = textwrap.dedent("""
        import torch
        from torch import nn

        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("grid", torch.linspace(0, 1, 5))   # moves with the module
                self.scale = nn.Parameter(torch.ones(1))

        def train(x, data, device, generator):
            a = torch.zeros(3, device=device)
            b = torch.as_tensor(data, dtype=torch.float64, device="cpu")  # deliberate CPU tensor
            c = torch.randperm(5, generator=generator).to(x.device)
            d = torch.from_numpy(data).to(device=device, dtype=torch.float32)
            e = torch.zeros_like(x)
            g = torch.Generator(device="cpu")
            r = torch.randn(3, generator=g, device="cpu").to(device) + torch.rand(3, generator=g).to(x)
            state = torch.load("m.pt", map_location="cpu")
            h = x.detach().cpu().numpy() + x.cpu().detach().numpy() + x.to("cpu").numpy()
            ok = torch.cuda.is_available()
            return a, b, c, d, e, g, r, state, h, ok
    """)
    assert scan_source(snippet) == []
