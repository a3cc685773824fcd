"""Time and peak memory of ``uqcal.metrics.ece_iwata`` on many points and levels (issue 39: 2M points x 999 levels),
the searchsorted version against the (L, n) comparison matrix it replaced.

    python benchmarks/ece_iwata.py [--points 2000000] [--levels 999] [--no-matrix]

Peak memory is what numpy allocates during the call (tracemalloc, which numpy reports to), beyond the inputs.
``--no-matrix`` skips the comparison matrix (it allocates points x levels bytes: 2 GB at the defaults).
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np

from uqcal.metrics import ece_iwata


def ece_comparison_matrix(pit: np.ndarray, levels: np.ndarray) -> float:
    """The previous implementation: p_hat(p) = mean(pit <= p) from an (L, n) boolean matrix."""
    frequencies = np.mean(pit[None, :] <= levels[:, None], axis=1)
    return float(np.mean(np.abs(levels - frequencies)))


def measure(fn, *args) -> tuple[float, float, float]:
    """(value, seconds, peak MB) of one call."""
    tracemalloc.start()
    start = time.perf_counter()
    value = fn(*args)
    seconds = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return value, seconds, peak / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=2_000_000)
    parser.add_argument("--levels", type=int, default=999)
    parser.add_argument("--no-matrix", action="store_true", help="skip the (L, n) comparison matrix")
    args = parser.parse_args()
    pit = np.random.default_rng(0).uniform(size=args.points)
    levels = np.arange(1, args.levels + 1) / (args.levels + 1)
    rows = [("searchsorted (uqcal.metrics.ece_iwata)", *measure(ece_iwata, pit, levels))]
    if not args.no_matrix:
        rows.append(("comparison matrix (before)", *measure(ece_comparison_matrix, pit, levels)))
        assert abs(rows[0][1] - rows[1][1]) < 1e-12, "the two versions disagree"
    print(f"ece_iwata on {args.points:,} points x {args.levels} levels")
    print(f"{'version':<40}  {'seconds':>8}  {'peak MB':>8}  value")
    for name, value, seconds, peak in rows:
        print(f"{name:<40}  {seconds:8.3f}  {peak:8.1f}  {value:.6g}")


if __name__ == "__main__":
    main()
