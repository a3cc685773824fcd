"""CPU seconds Python's interpreter teardown costs a pipeline step's process, per set of imported modules.

Each row runs ``python -c "import <modules>"`` twice over: ending normally (module finalisation, garbage
collection, atexit) and ending with ``os._exit(0)`` right after the imports, as ``uqcal.cli`` ends a step that
succeeded (``exit_without_teardown``). The two run alternately, --repeat pairs (this VM's speed drifts from
minute to minute, so unpaired minima mislead); printed: the median CPU (user + system, the child's rusage) of
each and the median of the paired differences, what the teardown costs every such process.

    python docs/experiments/process_teardown.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys

IMPORTS = {
    "pandas": "pandas",
    "torch": "torch",
    "torch + torch._dynamo (first optimiser)": "torch, torch._dynamo",
    "a train job's (torch, gpytorch, pandas, sklearn, _dynamo)": "torch, torch._dynamo, gpytorch, pandas, sklearn",
}


def child_cpu(code: str) -> tuple[float, str]:
    """CPU seconds (user + system, from the child's rusage) of ``python -c code`` in a fresh process, and its
    standard output."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"{'imports':>58} | normal exit | os._exit | teardown (CPU s, medians of {args.repeat} pairs)")
    for label, modules in IMPORTS.items():
        pairs = [(child_cpu(f"import {modules}")[0], child_cpu(f"import os, {modules}; os._exit(0)")[0])
                 for _ in range(args.repeat)]
        normal, fast = (statistics.median(side) for side in zip(*pairs, strict=True))
        saved = statistics.median(a - b for a, b in pairs)
        print(f"{label:>58} | {normal:11.2f} | {fast:8.2f} | {saved:.2f}")


if __name__ == "__main__":
    main()
