"""Claims on a size the paper names: a method's metric against a fixed value (``versus_value``: RIO's improvement
ratio "above 0.5", App. D.3) and a paired relative reduction of at least a stated fraction (``relative_reduction``:
calibrated BO "accelerating search by anywhere from 5 % up to 50 %").

Both reduce a row to paired differences and test them as every comparison row is tested (``verdicts.paired_row``,
superiority in the claim's direction), so the statistics are those of ``uqcal.metrics.replication``:
- ``versus_value``: d_i = x_i - value over the row's runs (a one-sample test of the mean against the value);
- ``relative_reduction``: d_i = a_i - (1 - reduction) b_i, paired by seed; mean(d) < 0 is mean(a) < (1 - reduction)
  mean(b), i.e. a at least ``reduction`` below b (for positive b, as steps or errors).
"""

from __future__ import annotations

import numpy as np

from uqcal.metrics import replication as R
from uqcal.pipeline.report.tables import fmt
from uqcal.pipeline.report.verdicts import ClaimContext, ClaimResult, _per_seed, declared_seeds, finish, paired_row

_TEST_NAMES = {"ttest": "one-sample t", "wilcoxon": "Wilcoxon signed-rank"}
_DIRECTIONS = {"greater": 1, "less": -1}


def _test(check: dict) -> str:
    test = check.get("test", "ttest")
    if test not in _TEST_NAMES:
        raise ValueError(f"test: expected one of {sorted(_TEST_NAMES)}, got {test!r}")
    return test


def check_versus_value(claim: dict, ctx: ClaimContext) -> ClaimResult:
    """Per (dataset, setting): the method's metric over the row's declared runs is above (``direction: greater``) or
    below (``less``) the fixed ``value``, tested on x_i - value."""
    check = claim["check"]
    metric, method, value = check["metric"], check["method"], float(check["value"])
    direction = _DIRECTIONS[check.get("direction", "greater")]
    test, alpha = _test(check), float(check.get("alpha", R.ALPHA))
    declared = ctx.declared_runs(claim["id"])
    evidence, skipped = [], []
    for (dataset, setting, name), runs in _per_seed(ctx, check, metric).items():
        if name != method:
            continue
        label = f"{dataset} / {setting}"
        seeds, why = declared_seeds([runs], declared)
        if seeds is None:
            skipped.append(f"{label}: {why}")
            continue
        x = np.array([runs[s] for s in seeds], float)
        describe = f"{metric}({method}) {fmt(x.mean())} against {fmt(value)} over {len(seeds)} runs"
        name_of_test = "one-sample t" if test == "ttest" else "Wilcoxon signed-rank against the value"
        evidence.append(paired_row(claim, ctx, label, dataset, setting, x - value, test, direction, "better", value,
                                   None, name_of_test, describe=describe))
    side = "above" if direction > 0 else "below"
    return finish(claim, ctx, evidence, f"no runs of {method} with {metric} ({side} {fmt(value)})", alpha, skipped)


def check_relative_reduction(claim: dict, ctx: ClaimContext) -> ClaimResult:
    """Per (dataset, setting): ``a``'s metric is at least ``reduction`` (a fraction) below ``b``'s, paired by seed:
    superiority of a over (1 - reduction) b. The row's text gives the observed relative reduction."""
    check = claim["check"]
    metric, a, b = check["metric"], check["a"], check["b"]
    reduction = float(check["reduction"])
    if not 0.0 <= reduction < 1.0:
        raise ValueError(f"reduction: a fraction in [0, 1), got {reduction!r}")
    test, alpha = _test(check), float(check.get("alpha", R.ALPHA))
    declared = ctx.declared_runs(claim["id"])
    per_seed = _per_seed(ctx, check, metric)
    evidence, skipped = [], []
    for dataset, setting in dict.fromkeys((d, s) for d, s, _ in per_seed):
        runs_a, runs_b = per_seed.get((dataset, setting, a)), per_seed.get((dataset, setting, b))
        if not runs_a or not runs_b:
            continue
        label = f"{dataset} / {setting}"
        seeds, why = declared_seeds([runs_a, runs_b], declared)
        if seeds is None:
            skipped.append(f"{label}: {why}")
            continue
        va = np.array([runs_a[s] for s in seeds], float)
        vb = np.array([runs_b[s] for s in seeds], float)
        observed = 1.0 - va.mean() / vb.mean() if vb.mean() != 0 else float("nan")
        describe = (f"{metric}({a}) {fmt(va.mean())} vs {metric}({b}) {fmt(vb.mean())}: {observed:.0%} lower "
                    f"(the claim: at least {reduction:.0%}); tested on {a} - {1 - reduction:g} x {b}, n = {len(seeds)}")
        name_of_test = "paired t" if test == "ttest" else "Wilcoxon signed-rank"
        evidence.append(paired_row(claim, ctx, label, dataset, setting, va - (1.0 - reduction) * vb, test, -1,
                                   "better", float((1.0 - reduction) * vb.mean()), None, name_of_test,
                                   describe=describe))
    return finish(claim, ctx, evidence, f"no row has both {a} and {b} for {metric}", alpha, skipped)
