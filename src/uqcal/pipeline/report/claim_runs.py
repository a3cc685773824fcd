"""Which rows a claim tests in a config, and whether they run the runs the config declares for it.

The runs per row of each claim are declared in the run config (``report.claim_runs``) before any result exists
(docs/verdicts.md). A declared n that a row cannot reach is known from the config alone: this module lists those
rows, so that ``uqcal validate-config`` says so before any job runs, instead of the report listing the row as not
tested after the run.
"""

from __future__ import annotations

from uqcal.pipeline.config.runs import methods_for, seeds_for, settings_for
from uqcal.pipeline.paper_numbers import paper_dataset_for


def claim_methods(check: dict) -> tuple[set[str], set[str]]:
    """(methods every row of the claim needs, methods of which a row needs at least one) for a claim's check."""
    kind = check.get("kind")
    if kind in ("within_paper_spread", "within_paper_repeat_spread"):
        return set(), set(check.get("methods") or [])
    if kind == "stats_curve_greater":
        return {check.get("method", check["a"])}, set()
    if kind == "episode_paired":
        others = check["b"] if isinstance(check["b"], list) else [check["b"]]
        return {check["a"]}, set(others)
    if kind in ("best", "best_among", "monotone", "versus_value"):
        return {check["method"]}, set()
    needed = set()
    for key in ("a", "b"):
        if check.get(key):
            needed.add(check[key])
    for pair in check.get("pairs") or []:
        needed |= set(pair)
    return needed, set()


def claim_rows(config: dict, family: str, check: dict) -> list[tuple[str, str, list[str]]]:
    """(dataset, setting, methods) of each row the config runs for this claim: the check's dataset and setting
    filters, and every needed method (or one of the alternatives) run there."""
    fam = (config.get("families") or {}).get(family)
    if not fam:
        return []
    needed, any_of = claim_methods(check)
    papers_only = check.get("kind") in ("within_paper_spread", "within_paper_repeat_spread")
    rows = []
    for dataset in fam["datasets"]:
        if check.get("datasets") and dataset not in check["datasets"]:
            continue
        entry = (config.get("datasets") or {}).get(dataset) or {}
        if papers_only and (not paper_dataset_for(entry, family) or entry.get("stands_in_for")):
            continue  # a value check compares with the paper's number: only on the paper's own data
        for setting in settings_for(config, family, dataset):
            if check.get("settings") and str(setting) not in [str(s) for s in check["settings"]]:
                continue
            run = set(methods_for(config, family, dataset, setting))
            if not needed <= run or (any_of and not any_of & run):
                continue
            rows.append((dataset, setting, sorted(needed | (any_of & run))))
    return rows


def claim_runs_problems(config: dict, specs: dict[str, dict]) -> list[str]:
    """Rows whose methods run fewer seeds than the runs the config declares for the claim (``specs``: family ->
    report spec). Each is a row the report will list as not tested; the config should say why (e.g. a paper's
    own smaller n for one dataset) or declare fewer runs for the whole claim."""
    declared_all = (config.get("report") or {}).get("claim_runs") or {}
    problems = []
    for family, spec in specs.items():
        declared_family = declared_all.get(family) or {}
        unknown = sorted(set(declared_family) - {"default"} - {c["id"] for c in spec.get("claims") or []})
        if unknown:
            problems.append(f"report.claim_runs.{family}: {unknown} are not claims of the {family} report spec")
        for claim in spec.get("claims") or []:
            declared = declared_family.get(claim["id"], declared_family.get("default"))
            if declared is None or "check" not in claim:  # no check: a claim no config of uqcal runs
                continue
            for dataset, setting, methods in claim_rows(config, family, claim["check"]):
                short = {m: seeds_for(config, family, dataset, setting, m) for m in methods}
                short = {m: n for m, n in short.items() if n < int(declared)}
                if short:
                    runs = ", ".join(f"{m} {n}" for m, n in sorted(short.items()))
                    problems.append(f"claim {family}.{claim['id']} declares {declared} runs, but on {dataset} / "
                                    f"{setting} {runs} (the row will not be tested)")
    return problems
