"""Optimisation objectives for Bayesian optimisation (Deshpande & Kuleshov, Sec. 5), all written for minimisation.

Every objective is an :class:`Objective`: a search space (one :class:`Dimension` per input, possibly
discrete or log-scale), a vectorised ``evaluate(x_native)`` and, where known, the optimum value and its
minimisers. BO works in the unit cube: ``to_native(u)`` maps cube points to the objective's own
coordinates (rounding discrete dimensions), ``to_unit(x)`` maps back, ``snap(u)`` rounds a cube point to
the nearest feasible configuration.

Six-hump camel, Ackley, Branin and Hartmann-6 come from ``botorch.test_functions``; Forrester and
Alpine (N.1) are written here.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from uqcal.data.datasets import SOURCE_MODULES

DIM_KINDS = ("continuous", "log", "integer", "log_integer")


@dataclass(frozen=True)
class Dimension:
    """One input: ``kind`` continuous|log|integer|log_integer, bounds [low, high], optional ``step``.

    ``step`` rounds continuous/integer values to ``low + k * step`` (paper Tables 1-2: "step size 32").
    Log kinds are searched uniformly in log space (paper: "log-scale").
    """

    name: str
    low: float
    high: float
    kind: str = "continuous"
    step: float | None = None

    def __post_init__(self):
        if self.kind not in DIM_KINDS:
            raise ValueError(f"dimension {self.name!r}: kind {self.kind!r} not in {DIM_KINDS}")
        if not self.high > self.low:
            raise ValueError(f"dimension {self.name!r}: high {self.high} must exceed low {self.low}")
        if self.kind.startswith("log") and self.low <= 0:
            raise ValueError(f"dimension {self.name!r}: log-scale needs low > 0, got {self.low}")

    @property
    def is_log(self) -> bool:
        return self.kind.startswith("log")

    @property
    def is_discrete(self) -> bool:
        return self.kind.endswith("integer") or self.step is not None

    def to_native(self, u: np.ndarray) -> np.ndarray:
        u = np.clip(np.asarray(u, dtype=float), 0.0, 1.0)
        if self.is_log:
            x = np.exp(math.log(self.low) + u * (math.log(self.high) - math.log(self.low)))
        else:
            x = self.low + u * (self.high - self.low)
        if self.step is not None:
            x = self.low + np.round((x - self.low) / self.step) * self.step
        if self.kind.endswith("integer"):
            x = np.round(x)
        return np.clip(x, self.low, self.high)

    def to_unit(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        if self.is_log:
            return (np.log(x) - math.log(self.low)) / (math.log(self.high) - math.log(self.low))
        return (x - self.low) / (self.high - self.low)


@dataclass
class Objective:
    name: str
    dims: list[Dimension]
    function: Callable[[np.ndarray], np.ndarray]  # (n, d) native -> (n,)
    optimum_value: float | None = None
    minimisers: list[list[float]] = field(default_factory=list)
    description: str = ""

    @property
    def dim(self) -> int:
        return len(self.dims)

    @property
    def bounds(self) -> np.ndarray:
        """(2, d): lower and upper bounds in native coordinates."""
        return np.array([[d.low for d in self.dims], [d.high for d in self.dims]], dtype=float)

    @property
    def has_discrete(self) -> bool:
        return any(d.is_discrete for d in self.dims)

    def to_native(self, u) -> np.ndarray:
        u = np.atleast_2d(np.asarray(u, dtype=float))
        return np.stack([d.to_native(u[:, j]) for j, d in enumerate(self.dims)], axis=1)

    def to_unit(self, x) -> np.ndarray:
        x = np.atleast_2d(np.asarray(x, dtype=float))
        return np.stack([d.to_unit(x[:, j]) for j, d in enumerate(self.dims)], axis=1)

    def snap(self, u) -> np.ndarray:
        """Round cube points to the nearest feasible configuration (identity for continuous spaces)."""
        return self.to_unit(self.to_native(u))

    def __call__(self, x_native) -> np.ndarray:
        x = np.atleast_2d(np.asarray(x_native, dtype=float))
        if x.shape[1] != self.dim:
            raise ValueError(f"objective {self.name!r}: expected {self.dim} inputs, got shape {x.shape}")
        return np.asarray(self.function(x), dtype=float).reshape(-1)


# ----------------------------------------------------------------------------- hand-written objectives
def forrester(x: np.ndarray) -> np.ndarray:
    """Forrester et al. (2008): f(x) = (6x - 2)^2 sin(12x - 4) on [0, 1]."""
    x = x[:, 0]
    return (6 * x - 2) ** 2 * np.sin(12 * x - 4)


FORRESTER_ARGMIN = 0.7572487561660257  # bounded Brent minimisation in [0.6, 0.9], f = -6.02074
FORRESTER_LOCAL_ARGMIN = 0.1425891898894264  # local minimum, f = -0.98633 ("near 0.2" in the paper)


def alpine1(x: np.ndarray) -> np.ndarray:
    """Alpine N.1: sum_i |x_i sin(x_i) + 0.1 x_i| on [-10, 10]^d, minimum 0 at the origin."""
    return np.sum(np.abs(x * np.sin(x) + 0.1 * x), axis=1)


def _botorch_function(test_function) -> Callable[[np.ndarray], np.ndarray]:
    import torch

    def evaluate(x: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            # A numpy boundary: a few points per call, evaluated on the CPU whatever the run's device.
            return test_function.evaluate_true(torch.as_tensor(x, dtype=torch.float64, device="cpu")).cpu().numpy()

    return evaluate


def _from_botorch(name: str, test_function, description: str) -> Objective:
    dims = [Dimension(f"x{i}", float(lo), float(hi)) for i, (lo, hi) in enumerate(test_function._bounds)]
    return Objective(
        name=name,
        dims=dims,
        function=_botorch_function(test_function),
        optimum_value=float(test_function._optimal_value),
        minimisers=[list(map(float, m)) for m in test_function._optimizers],
        description=description,
    )


def make_synthetic(objective: str, dim: int | None = None) -> Objective:
    """The synthetic objectives of the paper and issue 7, by name."""
    from botorch.test_functions import synthetic as bt

    name = objective.lower()
    if name == "forrester":
        return Objective(
            "forrester",
            [Dimension("x0", 0.0, 1.0)],
            forrester,
            optimum_value=float(forrester(np.array([[FORRESTER_ARGMIN]]))[0]),
            minimisers=[[FORRESTER_ARGMIN]],
            description="Forrester (1-D), global minimum near 0.757, local minimum near 0.14",
        )
    if name in ("sixhump", "sixhumpcamel", "six_hump_camel"):
        return _from_botorch("sixhump", bt.SixHumpCamel(), "six-hump camel (2-D), two global minima")
    if name == "ackley":
        d = int(dim or 2)
        return _from_botorch(f"ackley{d}", bt.Ackley(dim=d), f"Ackley ({d}-D) on [-32.768, 32.768]^{d}")
    if name in ("alpine", "alpine1"):
        d = int(dim or 2)
        return Objective(
            f"alpine{d}",
            [Dimension(f"x{i}", -10.0, 10.0) for i in range(d)],
            alpine1,
            optimum_value=0.0,
            minimisers=[[0.0] * d],
            description=f"Alpine N.1 ({d}-D) on [-10, 10]^{d}",
        )
    if name == "branin":
        return _from_botorch("branin", bt.Branin(), "Branin (2-D), three global minima")
    if name in ("hartmann", "hartmann6"):
        if dim not in (None, 6):
            raise ValueError(f"hartmann6: dim must be 6, got {dim}")
        return _from_botorch("hartmann6", bt.Hartmann(dim=6), "Hartmann-6 on [0, 1]^6")
    raise ValueError(
        f"unknown synthetic objective {objective!r}; "
        "known: forrester, sixhump, ackley, alpine, branin, hartmann6"
    )


def get_objective(spec: dict, *, cache_dir=None) -> Objective:
    """An objective from a dataset registry ``source`` entry (``{type: synthetic|hpo, ...}``).

    The sources are the registry: ``uqcal.data.datasets.SOURCE_MODULES`` names each source type's module, and a
    source whose datasets are objectives exports ``make_objective(spec, *, cache_dir)``. This module imports
    no source (they import it: ``Dimension``, ``Objective``, ``describe``), so there is no import circle.
    """
    if not isinstance(spec, dict) or "type" not in spec:
        raise ValueError(f"objective source must be a mapping with a 'type', got {spec!r}")
    kind = spec["type"]
    module = SOURCE_MODULES.get(kind)
    make = getattr(importlib.import_module(module), "make_objective", None) if module is not None else None
    if make is None:
        raise ValueError(f"objective source type {kind!r} is not an objective (expected synthetic or hpo)")
    return make(spec, cache_dir=cache_dir)


def describe(objective: Objective):
    """The search space as a frame, one row per dimension (what data/raw/<name>.parquet holds)."""
    import pandas as pd

    rows = []
    for j, d in enumerate(objective.dims):
        rows.append(
            {
                "dimension": j,
                "name": d.name,
                "kind": d.kind,
                "lower": d.low,
                "upper": d.high,
                "step": float("nan") if d.step is None else float(d.step),
                "optimum_value": float("nan") if objective.optimum_value is None else objective.optimum_value,
                "minimiser": float("nan") if not objective.minimisers else objective.minimisers[0][j],
            }
        )
    return pd.DataFrame(rows)
