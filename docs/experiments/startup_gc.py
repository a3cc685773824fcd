"""CPU seconds Python's cyclic garbage collector costs a train job's imports, and what pausing it saves.

Each row imports a family's train-job modules in a fresh process (``python -c``), twice over: with the collector as
Python starts it, and paused for the imports then frozen (``gc.freeze``) and resumed, as the train step loads its
method (``uqcal.pipeline.steps.train.imports_uncollected``). The two run alternately, --repeat pairs (this VM's
speed drifts from minute to minute); printed: the median CPU of each (user + system, the child's rusage), the
median of the paired differences, and the seconds the collector itself ran during the imports (``gc.callbacks``,
the default side), with its full (generation 2) collections. Both end with ``os._exit(0)``, as a step that
succeeded does (``uqcal.cli.exit_without_teardown``), so no teardown is counted.

    python docs/experiments/startup_gc.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import statistics

from process_teardown import child_cpu  # this folder's: run as a script

# What each family's train job imports before it trains (its method module and what the train step loads).
IMPORTS = {
    "metareg (metacal)": "uqcal.methods.metareg.metacal",
    "rio (rio)": "uqcal.methods.rio.rio",
    "qr (isotonic)": "uqcal.methods.qr.isotonic",
    "fewshot (md)": "uqcal.methods.fewshot.md",
    "bo (calibrated)": "uqcal.methods.bo.calibrated",
}
STEP = "import pandas, pyarrow.parquet, torch._dynamo, gpytorch, uqcal.pipeline.steps.train"

DEFAULT = """
import gc, json, os, sys, time
spent, full, started = [0.0], [0], [0.0]
def watch(phase, info):
    if phase == "start":
        started[0] = time.process_time()
    else:
        spent[0] += time.process_time() - started[0]
        full[0] += info["generation"] == 2
gc.callbacks.append(watch)
{imports}
print(json.dumps({{"gc_seconds": spent[0], "full_collections": full[0]}}), flush=True)
os._exit(0)
"""
PAUSED = """
import gc
gc.disable()
{imports}
gc.freeze()
gc.enable()
import os
os._exit(0)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"{'train job':>20} | collector on | paused, frozen | saved | in the collector (full collections)"
          f"   CPU s, medians of {args.repeat} pairs")
    for label, module in IMPORTS.items():
        imports = f"{STEP}\nimport {module}"
        pairs, inside = [], []
        for _ in range(args.repeat):
            default, out = child_cpu(DEFAULT.format(imports=imports))
            paused, _ = child_cpu(PAUSED.format(imports=imports))
            pairs.append((default, paused))
            inside.append(json.loads(out.strip().splitlines()[-1]))
        on, off = (statistics.median(side) for side in zip(*pairs, strict=True))
        saved = statistics.median(a - b for a, b in pairs)
        gc_seconds = statistics.median(i["gc_seconds"] for i in inside)
        full = statistics.median(i["full_collections"] for i in inside)
        print(f"{label:>20} | {on:12.2f} | {off:14.2f} | {saved:5.2f} | {gc_seconds:.2f} ({full:.0f})")


if __name__ == "__main__":
    main()
