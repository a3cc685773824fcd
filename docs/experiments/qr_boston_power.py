"""QR on Boston under the paper's folds, at more repeats than the default's 3: does QR lower Dropout VI's CE?

    PYTHONPATH=src python docs/experiments/qr_boston_power.py [--repeats 20] [--base dvi] [--qr dvi_qr]
                                                        [--dataset boston] [--config config/config.yaml]
                                                        [--out fits.json]

Runs the registry's methods exactly as the pipeline does (the same RunContext seeds: fit k is the default run's
seed k, so the first 15 fits are the default run's own) on the paper's protocol (`KFold(5)` without shuffling,
repeat r = seeds 5r .. 5r + 4), one process, one thread, in a temporary folder. Prints the per-fold means, the
plain and fold-blocked paired tests over all fits, and the fits the fold-blocked test would need for 80 % power
at the paper's own difference (Table 1 or 2 of src/uqcal/methods/qr/paper_numbers.yaml) given our scatter.

The authors' code (occam-ra-zor/QR) on the same folds is the comparison in docs/qr.md ("Boston under the
authors' code"); it is not part of this project and is not run here.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from scipy import stats

from uqcal.core.io import write_json
from uqcal.data import load_table, materialise
from uqcal.data.splits import kfold_split
from uqcal.methods.api import RunContext, get_entry, resolve_params
from uqcal.metrics.stats import fold_blocked_test, runs_for_power
from uqcal.pipeline.config.load import load_config
from uqcal.pipeline.paper_numbers import load_reference

FOLDS = 5


def fit(config: dict, workdir: Path, dataset: str, method: str, seed: int, raw: Path, split: Path) -> float:
    qr = config["families"]["qr"]
    params = resolve_params("qr", method, qr["methods"].get(method) or {})
    ctx = RunContext(
        family="qr", dataset=dataset, setting="cv5", method=method, seed=seed, config={"torch_threads": 1},
        dataset_spec=config["datasets"][dataset], setting_params={"folds": FOLDS, "shuffle": False},
        family_params={}, params=params, run_dir=workdir / method / f"seed{seed}", split_path=split,
        raw_path=raw, depends_dir=None, device=torch.device("cpu"), log=logging.getLogger("qr_boston_power"))
    model = get_entry("qr", method).load_class()(params)
    model.train(ctx)
    return float(model.evaluate(ctx)["ce"])


def paper_difference(config: dict, dataset: str, base: str, qr: str) -> float | None:
    """The paper's CE(qr) - CE(base) on this dataset (Tables 1-2), None when it is not one of the paper's."""
    paper_name = (config["datasets"][dataset].get("paper_dataset") or {}).get("qr")
    return load_reference("qr").difference(["table1", "table2"], paper_name, "cv5", qr,
                                                                     base, "ce")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--dataset", default="boston")
    parser.add_argument("--base", default="dvi")
    parser.add_argument("--qr", default="dvi_qr")
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--out", help="also write every fit's CE here (JSON: method -> list by seed)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    config = load_config(args.config)
    seeds = list(range(FOLDS * args.repeats))
    ce: dict[str, np.ndarray] = {}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        raw, _ = materialise(args.dataset, config["datasets"][args.dataset], workdir / "data")
        table = load_table(args.dataset, spec=config["datasets"][args.dataset], raw_path=raw)
        splits = {}
        for seed in seeds:
            splits[seed] = workdir / "splits" / f"seed{seed}.json"
            write_json(splits[seed], kfold_split(table, {"folds": FOLDS, "shuffle": False}, seed))
        for method in (args.base, args.qr):
            ce[method] = np.array([fit(config, workdir, args.dataset, method, s, raw, splits[s]) for s in seeds])
    if args.out:
        write_json(Path(args.out), {method: values.tolist() for method, values in ce.items()})
    base, qr = ce[args.base], ce[args.qr]
    diff, fold = qr - base, np.array(seeds) % FOLDS
    print(f"{args.dataset}, paper's folds (KFold({FOLDS}) in file order), {args.repeats} repeats = {len(seeds)} fits "
          f"per method, {time.perf_counter() - start:.0f} s")
    print(f"{'fold':>6} {args.base + ' CE':>10} {args.qr + ' CE':>10} {'diff':>8} {'± se':>6}")
    for f in range(FOLDS):
        d = diff[fold == f]
        print(f"{f:>6} {base[fold == f].mean():>10.2f} {qr[fold == f].mean():>10.2f} {d.mean():>+8.2f} "
              f"{d.std(ddof=1) / np.sqrt(d.size):>6.2f}")
    print(f"{'all':>6} {base.mean():>10.2f} {qr.mean():>10.2f} {diff.mean():>+8.2f}")
    blocked = fold_blocked_test(dict(zip(seeds, diff, strict=True)), FOLDS)
    print(f"paired t over the fits: p = {stats.ttest_rel(qr, base).pvalue:.3f}; fold-blocked (df {blocked['df']}): "
          f"p = {blocked['p_two']:.3f}, detectable at 80 % power |diff| >= {blocked['mde']:.2f}; "
          f"QR lower in {int((diff < 0).sum())} of {diff.size}")
    paper = paper_difference(config, args.dataset, args.base, args.qr)
    if paper is not None:
        needed = runs_for_power(paper, blocked["se"] * np.sqrt(diff.size), blocks=FOLDS)
        print(f"the paper's difference {paper:+.2f}: the fold-blocked test needs {needed:.0f} fits "
              f"({np.ceil(needed / FOLDS):.0f} repeats of {FOLDS} folds) for 80 % power at our scatter")


if __name__ == "__main__":
    main()
