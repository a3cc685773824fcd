"""Claims decided on few-shot classification's test episodes (every method predicts the same episodes).

A claim about a method, not one trained model, needs training seeds as its unit (REPLICATION-STATISTICS Sec. 10;
issue 47): the paper trains one model per method, and episodes are pseudo-replicates of that model, so the
variance between training seeds is in no error bar of an episode test. So a claim is decided only where the config
declares at least ``MIN_MODELS`` trained models per method (``report.claim_runs.<family>``): per model, the metric over
its test episodes (acc, nll: the episode mean; ece, mce: pooled over the queries like the metric itself), then a
paired t over the models. With fewer, the claim is ``not_run`` naming ``SEEDS_CONFIG`` (what it needs), and the
one-model comparison over episodes is listed beside it as descriptive only:

- acc, nll: the per-episode value, paired t-test over (seed, episode) pairs;
- ece, mce: a paired bootstrap over episodes (the same resampled episodes for both methods), two-sided
  p = 2 min(P(Δ* <= 0), P(Δ* >= 0)).

Spec::

    check: {kind: episode_paired, metric: acc|nll|ece|mce, probs: raw|ts|tsm|nllts, a: md, b: [dkt, protonet],
            require: not_worse|better, alpha: 0.05, scope: every_row|majority|{at_least: f}|any_row,
            settings: [...], datasets: [...], n_boot: 2000}

``probs`` picks the probability columns: the model's predictive (raw, p0..) or a recalibration's
(``<probs>_p0..``, e.g. a temperature-scaled copy of the probabilities). A row holds when every comparison meets ``require``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from uqcal.metrics.replication import sign_test_pvalues
from uqcal.metrics.stats import episode_ttest_pvalue
from uqcal.pipeline.report.verdicts import (
    Evidence,
    _filter,
    declared_seeds,
    finish,
    hypothesis_test,
    paired_numbers,
)

N_BINS = 15
MIN_MODELS = 3  # a paired t over trained models reaches alpha = .05 from 3 (df 2)
SEEDS_CONFIG = "config/fewshot-seeds.yaml"
SEEDS_NEEDS = ("3 trained models per method (training seeds as the unit): about 30 CPU-minutes more than the "
               "default run")
LOWER_IS_BETTER = {"acc": False, "nll": True, "ece": True, "mce": True}


def _probability_columns(frame: pd.DataFrame, probs: str) -> list[str]:
    prefix = "p" if probs == "raw" else f"{probs}_p"
    cols = [c for c in frame.columns if c.startswith(prefix) and c[len(prefix):].isdigit()]
    return sorted(cols, key=lambda c: int(c[len(prefix):]))


def episode_table(frame: pd.DataFrame, probs: str) -> pd.DataFrame:
    """Per (seed, episode): n, acc, nll and the 15-bin sums behind ECE/MCE (count_b, gap_b = sum(correct - conf))."""
    cols = _probability_columns(frame, probs)
    if not cols:
        raise KeyError(f"no '{probs}' probability columns")
    p = frame[cols].to_numpy(float)
    y = frame["label"].to_numpy(int)
    conf = p.max(1)
    correct = (p.argmax(1) == y).astype(float)
    nll = -np.log(np.clip(p[np.arange(len(y)), y], 1e-12, 1.0))
    index = np.clip(np.ceil(conf * N_BINS).astype(int) - 1, 0, N_BINS - 1)
    out = pd.DataFrame({"seed": frame["seed"].to_numpy(), "episode": frame["episode"].to_numpy(),
                        "correct": correct, "nll": nll})
    for b in range(N_BINS):
        in_bin = index == b
        out[f"n{b}"] = in_bin.astype(float)
        out[f"g{b}"] = np.where(in_bin, correct - conf, 0.0)
    grouped = out.groupby(["seed", "episode"], sort=True)
    table = grouped.sum()
    table["n"] = grouped.size()
    table["acc"] = table.pop("correct") / table["n"]
    table["nll"] = table["nll"] / table["n"]
    return table


def pooled_errors(table: pd.DataFrame, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ECE and MCE of the episodes pooled with integer `weights` (B, E) (bootstrap counts): (B,) each."""
    counts = weights @ table[[f"n{b}" for b in range(N_BINS)]].to_numpy()
    gaps = np.abs(weights @ table[[f"g{b}" for b in range(N_BINS)]].to_numpy())
    ece = gaps.sum(1) / (weights @ table["n"].to_numpy())
    with np.errstate(invalid="ignore", divide="ignore"):
        mce = np.where(counts > 0, gaps / np.maximum(counts, 1), 0.0).max(1)
    return ece, mce


def compare(ta: pd.DataFrame, tb: pd.DataFrame, metric: str, alpha: float, n_boot: int, seed: int = 0) -> dict:
    """Paired comparison of a with b on their shared (seed, episode) pairs."""
    shared = ta.index.intersection(tb.index)
    ta, tb = ta.loc[shared], tb.loc[shared]
    n = len(shared)
    lower = LOWER_IS_BETTER[metric]
    z = stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(0.8)
    if metric in ("acc", "nll"):
        va, vb = ta[metric].to_numpy(), tb[metric].to_numpy()
        diff = va - vb
        mean_a, mean_b = float(va.mean()), float(vb.mean())
        se = float(diff.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
        # the same difference on every episode has no spread: the sign test's 2 / 2^n (1 when all are zero), not 0
        p = (sign_test_pvalues(diff)[0] if n and np.allclose(diff, diff[0], rtol=1e-12, atol=0.0)
             else episode_ttest_pvalue(va, vb))
        test = f"paired t-test over {n} episodes"
    else:
        pick = 0 if metric == "ece" else 1
        ones = np.ones((1, n))
        mean_a, mean_b = float(pooled_errors(ta, ones)[pick][0]), float(pooled_errors(tb, ones)[pick][0])
        rng = np.random.default_rng(seed)
        weights = rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot).astype(float)
        delta = pooled_errors(ta, weights)[pick] - pooled_errors(tb, weights)[pick]
        se = float(delta.std(ddof=1))
        p = float(min(1.0, 2 * min(np.mean(delta <= 0), np.mean(delta >= 0))))
        test = f"paired bootstrap over {n} episodes ({n_boot} resamples)"
    delta = mean_a - mean_b
    if p >= alpha:
        outcome = "tie"
    else:
        outcome = "better" if (delta < 0) == lower else "worse"
    return {"a": mean_a, "b": mean_b, "delta": delta, "p": p, "se": se, "mde": z * se, "n": n,
            "outcome": outcome, "test": test}


def per_model(table: pd.DataFrame, metric: str, seeds: list[int]) -> np.ndarray:
    """The metric of each trained model (seed) over its test episodes: the episode mean of acc / nll, the pooled
    ECE / MCE of its queries."""
    out = []
    for seed in seeds:
        rows = table[table.index.get_level_values("seed") == seed]
        if metric in ("acc", "nll"):
            out.append(float(rows[metric].mean()))
        else:
            out.append(float(pooled_errors(rows, np.ones((1, len(rows))))[0 if metric == "ece" else 1][0]))
    return np.array(out)


def check_episode_paired(claim: dict, ctx) -> object:
    """One evidence row per (dataset, setting, other method): superiority (``require: better``) or non-inferiority at
    the reference's margin (``require: not_worse``) of ``a`` over the other method, paired over trained models
    (at least ``MIN_MODELS`` declared); with fewer, not run, the episode comparison of one model descriptive only."""
    from uqcal.metrics import replication as R
    from uqcal.pipeline.report.tables import fmt

    check = claim["check"]
    metric, a = check["metric"], check["a"]
    if metric not in LOWER_IS_BETTER:
        raise ValueError(f"claims.{claim['id']}.check.metric: {metric!r}; known: {sorted(LOWER_IS_BETTER)}")
    others = check["b"] if isinstance(check["b"], list) else [check["b"]]
    probs, require = check.get("probs", "raw"), check.get("require", "not_worse")
    if require not in ("not_worse", "better"):
        raise ValueError(f"claims.{claim['id']}.check.require: {require!r}; use not_worse or better")
    alpha, n_boot = float(check.get("alpha", R.ALPHA)), int(check.get("n_boot", 2000))
    direction = -1 if LOWER_IS_BETTER[metric] else 1
    declared = ctx.declared_runs(claim["id"])
    by_models = declared is not None and declared >= MIN_MODELS
    keys = _filter(ctx.summary, check)[["dataset", "setting"]].drop_duplicates()
    evidence, skipped, descriptive = [], [], []
    for dataset, setting in keys.itertuples(index=False):
        if ctx.files is None:
            break
        tables = {}
        for method in [a, *others]:
            frame = ctx.files.load_predictions(dataset, str(setting), method)
            if frame is not None and _probability_columns(frame, probs):
                tables[method] = episode_table(frame, probs)
        if a not in tables:
            continue
        for other in others:
            if other not in tables:
                continue
            label = f"{dataset} / {setting}: vs {other}"
            seeds_a = set(tables[a].index.get_level_values("seed"))
            seeds_b = set(tables[other].index.get_level_values("seed"))
            seeds, why = declared_seeds([seeds_a, seeds_b], declared, minimum=MIN_MODELS if by_models else 1)
            if seeds is None:
                skipped.append(f"{label}: {why}")
                continue
            ta, tb = (t[t.index.get_level_values("seed").isin(seeds)] for t in (tables[a], tables[other]))
            if not by_models:
                r = compare(ta, tb, metric, alpha, n_boot)
                descriptive.append(f"{label} (descriptive only: {len(seeds)} trained model(s) per method, episodes "
                                   f"as pairs): {metric} ({probs}) {a} {fmt(r['a'])} vs {other} {fmt(r['b'])}, diff "
                                   f"{r['delta']:+.4f} ± {fmt(r['se'])} (se), p = {fmt(r['p'])} ({r['test']})")
                continue
            va, vb = per_model(ta, metric, seeds), per_model(tb, metric, seeds)
            d = va - vb
            estimate, se, df, p, note = paired_numbers(d, "ttest")
            row_test, margin_text, _ = hypothesis_test(claim, ctx, require, estimate, se, df, p, direction,
                                                       float(vb.mean()), d)
            margin_text = f" ({margin_text}: non-inferiority)" if margin_text else ""
            detail = (f"{metric} ({probs} probabilities) per trained model over its test episodes: {a} "
                      f"{fmt(va.mean())} vs {other} {fmt(vb.mean())} ({len(seeds)} models each), diff "
                      f"{estimate:+.4f} ± {fmt(se)} (se), paired t p = {fmt(row_test.p)}{margin_text}"
                      + (f"; {note}" if note else ""))
            evidence.append(Evidence(label, detail, dataset, str(setting), row_test,
                                     f"paired t over {len(seeds)} trained models", len(seeds), len(seeds)))
    if not by_models:
        result = finish(claim, ctx, [], "", alpha, skipped + descriptive)
        result.summary = (f"not run: a claim about a method needs training seeds as its unit (at least {MIN_MODELS} "
                          f"trained models per method); this config declares {declared or 'no'} "
                          f"(report.claim_runs of the family); {SEEDS_CONFIG} runs it ({SEEDS_NEEDS})")
        result.config, result.needs = SEEDS_CONFIG, SEEDS_NEEDS
        return result
    return finish(claim, ctx, evidence, f"no predictions of {a} and {others} with '{probs}' columns", alpha, skipped)
