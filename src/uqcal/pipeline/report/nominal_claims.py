"""Claims on one method's metric against a nominal value: ``against_nominal`` ("the 90 % intervals cover at least
90 %, within a margin": ``{kind: against_nominal, metric: cov90, nominal: 0.9, side: at_least, methods: [...],
accept: not_worse}``).

Each (dataset, setting, method) row is a one-sample test of the runs' values minus the nominal value, decided by the
replication rules as a comparison row is (``verdicts.paired_row``): ``accept: better`` (the default) is superiority,
the metric beyond the nominal value on the claimed ``side`` (t, or the sign test without spread);
``accept: not_worse`` is non-inferiority at the margin the family's ``paper_numbers.yaml`` declares for the claim
(``margins.<claim id>``, with its reason; a ``relative`` margin is a share of the nominal value), and
``accept: equivalent`` is equivalence (TOST) at that margin. With no paper number for a row the verdicts are
generalises / does_not_generalise / undecided.
"""

from __future__ import annotations

import numpy as np

from uqcal.metrics import replication as R
from uqcal.pipeline.report.comparison_claims import _accept
from uqcal.pipeline.report.tables import fmt
from uqcal.pipeline.report.verdicts import ClaimContext, ClaimResult, _per_seed, declared_seeds, finish, paired_row

SIDES = {"at_least": 1, "at_most": -1}


def check_against_nominal(claim: dict, ctx: ClaimContext) -> ClaimResult:
    check = claim["check"]
    metric, nominal = check["metric"], float(check["nominal"])
    side = check.get("side", "at_least")
    if side not in SIDES:
        raise ValueError(f"side: expected 'at_least' or 'at_most', got {side!r}")
    methods = check.get("methods") or ([check["method"]] if check.get("method") else None)
    accept, alpha = _accept(check), float(check.get("alpha", R.ALPHA))
    declared = ctx.declared_runs(claim["id"])
    evidence, skipped = [], []
    for (dataset, setting, method), values in sorted(_per_seed(ctx, check, metric).items()):
        if methods and method not in methods:
            continue
        label = f"{dataset} / {setting}" + (f" / {method}" if not methods or len(methods) > 1 else "")
        seeds, why = declared_seeds([values], declared)
        if seeds is None:
            skipped.append(f"{label}: {why}")
            continue
        ours = np.array([values[s] for s in seeds], float)
        describe = f"{metric}({method}) {fmt(ours.mean())} vs nominal {fmt(nominal)}, n = {len(seeds)}"
        evidence.append(paired_row(claim, ctx, label, dataset, setting, ours - nominal, "ttest", SIDES[side], accept,
                                   nominal, None, "one-sample t", describe=describe))
    return finish(claim, ctx, evidence, f"no run of {methods or 'any method'} has {metric}", alpha, skipped)
