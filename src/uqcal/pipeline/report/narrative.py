"""What a reproduction report says in words, from the run: verdicts as a reader reads them (display labels, icons,
colours and definitions; the internal codes of ``uqcal.metrics.replication`` stay as they are), each claim's line
with its reason, the paper-level summary paragraph, the scope, the compute spent and the family's deviations
(``src/uqcal/methods/<family>/deviations.yaml``). Shared by the HTML pages (``html``/``build``) and REPORT.md
(``markdown``), so both say the same thing.

Numbers are written by their uncertainty: the standard error keeps two significant digits and the value is
rounded to the same decimal place (``fmt_se``); p-values have one notation (``fmt_p``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from uqcal.metrics import replication as R
from uqcal.pipeline.report.numbers import _finite, decimals_for, fmt_at, fmt_num, fmt_p, fmt_se
from uqcal.pipeline.report.verdicts import NO_PAPER_NUMBER, PAPER_DATA, STAND_INS, ClaimResult, Evidence


@dataclass(frozen=True)
class Display:
    """How a verdict is shown: a CSS class, an icon, a label, the badge colour (Okabe–Ito, black text on it) and
    a one-sentence definition for the hover title and the legend."""

    key: str
    icon: str
    label: str
    colour: str
    definition: str


BETTER = "better_than_paper"  # a display, not a verdict code: 'contradicted' only by being better than published
HELD, UNSETTLED, SMALLER, FAILED, NOTRUN = "held", "unsettled", "smaller", "failed", "notrun"

DISPLAYS: dict[str, Display] = {
    R.REPRODUCED: Display(HELD, "✓", "Reproduced", "#009E73",
                          "We find the paper's effect, significant and of a size the paper's own numbers allow."),
    R.REPRODUCED_SMALLER: Display(HELD, "✓", "Reproduced, smaller effect", "#009E73",
                                  "The effect is there and significant, but smaller than the paper's numbers "
                                  "predict."),
    BETTER: Display("better", "↑", "Better than the paper", "#56B4E9",
                    "Our result lies beyond the range the paper's numbers allow, on the favourable side: the "
                    "claim holds more strongly than published (not a failure)."),
    R.CONSISTENT: Display(UNSETTLED, "?", "Not settled: too few runs", "#E69F00",
                          "Not significant, yet close to the paper's value: the runs made cannot tell; the line "
                          "says how many runs would."),
    R.SMALLER_THAN_PAPER: Display(SMALLER, "↓", "Smaller than the paper's", "#F0E442",
                                  "Not significant, though the paper's effect would have been detected: the effect is "
                                  "smaller than published."),
    R.CONTRADICTED: Display(FAILED, "✗", "Not reproduced", "#D55E00",
                            "Significant against the claim, or outside the range the paper's numbers allow on the "
                            "unfavourable side."),
    R.GENERALISES: Display(HELD, "✓", "Holds, direction only", "#009E73",
                           "No paper number to compare with (stand-in data, or the paper prints none): the effect "
                           "is significant in the claimed direction."),
    R.DOES_NOT_GENERALISE: Display(FAILED, "✗", "Fails, direction only", "#D55E00",
                                   "No paper number to compare with (stand-in data, or the paper prints none): "
                                   "significant against the claim."),
    R.UNDECIDED: Display(UNSETTLED, "?", "Undecided, direction only", "#E69F00",
                         "No paper number to compare with (stand-in data, or the paper prints none): not "
                         "significant either way."),
    R.NOT_RUN: Display(NOTRUN, "–", "Not run here", "#BBBBBB",
                       "This configuration does not run it; the named configuration does."),
}
# The order of the legend and the counts: what held first.
DISPLAY_ORDER = (R.REPRODUCED, R.REPRODUCED_SMALLER, BETTER, R.GENERALISES, R.CONSISTENT, R.UNDECIDED,
                 R.SMALLER_THAN_PAPER, R.CONTRADICTED, R.DOES_NOT_GENERALISE, R.NOT_RUN)


def verdict_colours() -> list[str]:
    """Every distinct badge colour a page may show side by side (the colour-blind check reads it)."""
    return list(dict.fromkeys(d.colour for d in DISPLAYS.values()))


# ---------------------------------------------------------------------------------------------- verdicts

def _decisive_rows(res: ClaimResult) -> list[Evidence]:
    """The rows the claim's verdict comes from: the paper's own data where there are any, else the others."""
    rows = [e for e in res.evidence if e.group == PAPER_DATA and e.test is not None]
    return rows or [e for e in res.evidence if e.test is not None]


def row_is_better(e: Evidence) -> bool:
    """A contradicted row that is so only by being beyond the paper's prediction interval on the claim's side
    (``side`` is measured in the claim's direction: 'above' is better), not significant against the claim."""
    t = e.test
    if e.verdict != R.CONTRADICTED or t is None or e.outcome.get("side") != "above":
        return False
    p = e.p_adjusted if e.p_adjusted is not None else t.p
    if t.hypothesis == "superiority" and _finite(p) and float(p) < R.ALPHA and t.direction * t.estimate < 0:
        return False
    against = getattr(t, "p_against", None)
    return not (t.hypothesis in ("noninferiority", "equivalence") and _finite(against) and float(against) < R.ALPHA)


def display_key(res: ClaimResult) -> str:
    """The verdict code, or ``BETTER`` for a contradicted claim whose every contradicted decisive row is better
    than the paper: a result better than published is never shown as a failure."""
    if res.verdict == R.CONTRADICTED:
        against = [e for e in _decisive_rows(res) if e.verdict == R.CONTRADICTED]
        if against and all(row_is_better(e) for e in against):
            return BETTER
    return res.verdict if res.verdict in DISPLAYS else R.NOT_RUN


def display(res: ClaimResult) -> Display:
    return DISPLAYS[display_key(res)]


def key_row(res: ClaimResult) -> Evidence | None:
    """The row a claim's line quotes: a decisive row with the claim's own verdict (the better-than-paper one
    for BETTER), else the first decisive row."""
    rows = _decisive_rows(res)
    if not rows:
        return None
    wanted = res.verdict
    same = [e for e in rows if e.verdict == wanted]
    if wanted == R.CONTRADICTED:  # the row that explains the display: a failing one unless all are better
        better = display_key(res) == BETTER
        same = [e for e in same if row_is_better(e) == better] or same
    with_paper = [e for e in same if e.test.paper_estimate is not None]
    return (with_paper or same or rows)[0]


def row_reason(e: Evidence) -> str:
    """Why a row got its verdict, in plain words with its numbers."""
    t, o = e.test, e.outcome
    p = e.p_adjusted if e.p_adjusted is not None else t.p
    ptext = fmt_p(p) + (" (adjusted)" if e.p_adjusted is not None else "")
    interval = ""
    if o.get("pi_low") is not None:
        d = decimals_for(t.se) if _finite(t.se) and float(t.se) else 3
        interval = f"[{fmt_at(o['pi_low'], d)}, {fmt_at(o['pi_high'], d)}]"
    verdict = e.verdict
    if verdict == R.REPRODUCED:
        if t.hypothesis == "match":
            return f"inside the paper's 95 % replication interval {interval}"
        return f"significant ({ptext}) and inside the paper's 95 % replication interval {interval}"
    if verdict == R.REPRODUCED_SMALLER:
        return f"significant ({ptext}) but below the paper's 95 % replication interval {interval}"
    if verdict == R.CONSISTENT:
        more = ""
        if e.n80 is not None and _finite(e.n80):
            more = f"; about {int(math.ceil(e.n80)):,} runs would detect the paper's effect"
        if t.hypothesis == "match":
            return f"inside the paper's 95 % replication interval {interval}"
        return f"not significant ({ptext}) but inside the paper's 95 % replication interval {interval}{more}"
    if verdict == R.SMALLER_THAN_PAPER:
        return (f"not significant ({ptext}), and the paper's effect would have been seen: smaller than published "
                "(small-telescopes test)")
    if verdict == R.CONTRADICTED:
        if row_is_better(e):
            return f"above the paper's 95 % replication interval {interval}: better than published"
        if t.hypothesis in ("superiority",) and _finite(p) and float(p) < R.ALPHA and t.direction * t.estimate < 0:
            return f"significant in the opposite direction ({ptext})"
        if t.hypothesis in ("noninferiority", "equivalence") and o.get("side") == "inside":
            return "worse than the other method by more than the declared margin"
        return f"outside the paper's 95 % replication interval {interval}, on the unfavourable side"
    if verdict == R.GENERALISES:
        return f"significant in the claimed direction ({ptext})"
    if verdict == R.DOES_NOT_GENERALISE:
        return f"significant against the claim ({ptext})"
    if verdict == R.UNDECIDED:
        return f"not significant either way ({ptext})"
    return e.detail


def claim_reason(res: ClaimResult) -> str:
    """The claim's line: ours ± se, the paper's value and the verdict's reason, for its key row; how many rows
    agree when there are several; for a claim not run, which config runs it and what it needs."""
    if res.verdict == R.NOT_RUN:
        parts = []
        config = getattr(res, "config", None)
        if config:
            parts.append(f"run by {config}")
        needs = getattr(res, "needs", None)
        if needs:
            parts.append(f"needs {needs}")
        if res.skipped and not parts:
            parts.append(res.skipped[0])
        return "; ".join(parts) or "no config here runs its methods"
    row = key_row(res)
    if row is None:
        return res.summary
    t = row.test
    text = f"ours {fmt_se(t.estimate, t.se)}"
    if t.paper_estimate is not None:
        paper = fmt_se(t.paper_estimate, t.paper_se) if _finite(t.paper_se) else fmt_num(t.paper_estimate)
        text += f" vs the paper's {paper}"
    text += f" ({row.label}): {row_reason(row)}"
    rows = _decisive_rows(res)
    if len(rows) > 1:
        agree = sum(e.verdict == row.verdict for e in rows)
        text += f"; {agree} of {len(rows)} rows give this verdict"
    return text


def claim_data(res: ClaimResult) -> str:
    """On which data the verdict was decided: the new ``decided_on`` text when the claim has it."""
    decided = getattr(res, "decided_on", None)
    if decided:
        return str(decided)
    if PAPER_DATA in res.by_data:
        return "on the paper's own data"
    if NO_PAPER_NUMBER in res.by_data:
        return "on the paper's data, which prints no number to compare"
    if STAND_INS in res.by_data:
        return "on stand-in data only: no paper number to compare"
    return ""


def is_fragile(res: ClaimResult) -> bool:
    stability = getattr(res, "stability", None) or {}
    return bool(stability.get("fragile"))


def stability_text(res: ClaimResult) -> str:
    stability = getattr(res, "stability", None) or {}
    if not stability:
        return ""
    share = stability.get("share")
    text = (f"same verdict in {share:.0%} of {stability.get('replications', '?')} replications "
            f"({stability.get('method', '')})") if _finite(share) else ""
    n = stability.get("n_stable_at_paper_effect")
    if n:
        text += f"; stable from about {n} runs at the paper's effect"
    return text


# ---------------------------------------------------------------------------------------------- summary

def count_by_display(claims: list[ClaimResult]) -> dict[str, int]:
    counts = {key: 0 for key in DISPLAY_ORDER}
    for res in claims:
        counts[display_key(res)] += 1
    return {k: n for k, n in counts.items() if n}


def counts_text(claims: list[ClaimResult]) -> str:
    """'3 reproduced; 1 better than the paper; 2 not run here'."""
    return "; ".join(f"{n} {DISPLAYS[k].label.lower()}" for k, n in count_by_display(claims).items())


def _short(text: str, limit: int = 90) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rsplit(" ", 1)[0] + "…"


def summary_sentence(claims: list[ClaimResult]) -> str:
    """One sentence for the index: how many claims held, on which data, how many differ and how many were not
    run."""
    if not claims:
        return "The paper's claims are not listed for checking."
    run = [c for c in claims if c.verdict != R.NOT_RUN]
    groups: dict[str, list[ClaimResult]] = {}
    for res in run:
        groups.setdefault(display(res).key, []).append(res)
    held = groups.get(HELD, [])
    on_paper = sum(PAPER_DATA in c.by_data for c in held)
    if not run:
        return f"None of the {len(claims)} claims could be decided in this configuration (see each claim for why)."
    parts = [f"{len(held)} of {len(claims)} claims held"
             + (f" ({on_paper or 'none'} on the paper's own data)" if held and on_paper != len(held)
                else " on the paper's own data" if held and on_paper else "")]
    if groups.get("better"):
        parts.append(f"{len(groups['better'])} came out better than published")
    if groups.get(UNSETTLED):
        parts.append(f"{len(groups[UNSETTLED])} not settled by the runs made")
    if groups.get(SMALLER):
        parts.append(f"{len(groups[SMALLER])} smaller than published")
    if groups.get(FAILED):
        parts.append(f"{len(groups[FAILED])} not reproduced")
    not_run = len(claims) - len(run)
    if not_run:
        parts.append(f"{not_run} not run in this configuration")
    return "; ".join(parts) + "."


def summary_paragraph(claims: list[ClaimResult]) -> list[str]:
    """The summary sentence, then one 'because' per claim that differs from the paper (not reproduced, smaller,
    or better), with its line's reason."""
    lines = [summary_sentence(claims)]
    for res in claims:
        if display(res).key in (FAILED, SMALLER, "better"):
            lines.append(f"“{_short(res.text)}”: {display(res).label.lower()}, because {claim_reason(res)}.")
    return lines


# ---------------------------------------------------------------------------------------------- family notes

DEVIATIONS_FILE = "deviations.yaml"
DEVIATION_KEYS = {"links", "deviations", "easy", "hard"}


def load_family_notes(family: str, package_dir: Path | None = None) -> dict:
    """The family's ``deviations.yaml`` (links, deviations from the paper and the authors' code with their
    reasons, what was easy and hard), or {} when the family has none. Each deviation needs ``what``, ``from``
    (paper | code | both), ``ours`` and ``reason``."""
    if package_dir is None:
        from uqcal.methods.api import get_family

        package_dir = get_family(family).report_spec_path.parent
    path = Path(package_dir) / DEVIATIONS_FILE
    if not path.exists():
        return {}
    notes = yaml.safe_load(path.read_text()) or {}
    unknown = set(notes) - DEVIATION_KEYS
    if unknown:
        raise ValueError(f"{family}/{DEVIATIONS_FILE}: unknown keys {sorted(unknown)}; allowed {sorted(DEVIATION_KEYS)}")
    for i, entry in enumerate(notes.get("deviations") or []):
        missing = {"what", "from", "ours", "reason"} - set(entry)
        if missing:
            raise ValueError(f"{family}/{DEVIATIONS_FILE}: deviations[{i}] lacks {sorted(missing)}")
        if entry["from"] not in ("paper", "code", "both"):
            raise ValueError(f"{family}/{DEVIATIONS_FILE}: deviations[{i}].from must be paper, code or both, "
                             f"got {entry['from']!r}")
    return notes


def hyperparameters(config: dict, family: str) -> list[tuple[str, str]]:
    """(what, value) rows of the resolved config for the family: seeds, split, each setting's and each method's
    parameters (as the run used them)."""
    fam = (config.get("families") or {}).get(family) or {}

    def text(params) -> str:
        if not params:
            return "defaults"
        if isinstance(params, dict):
            return ", ".join(f"{k} = {text(v) if isinstance(v, dict) else v}" for k, v in params.items())
        return str(params)

    rows = [("seeds (runs)", text(fam.get("seeds"))), ("datasets", ", ".join(map(str, fam.get("datasets") or [])))]
    if fam.get("split"):
        rows.append(("split", text(fam["split"])))
    for name, params in (fam.get("settings") or {}).items():
        rows.append((f"setting {name}", text(params)))
    for name, params in (fam.get("methods") or {}).items():
        rows.append((f"method {name}", text(params)))
    return rows


@dataclass
class Compute:
    jobs: int = 0
    wall_h: float = 0.0
    cpu_h: float = 0.0
    gpu_h: float = 0.0
    peak_rss_mb: float = 0.0
    cores_per_job: str = ""
    machines: list[str] | None = None
    per_rule: pd.DataFrame | None = None


def compute_spent(benchmarks: pd.DataFrame, family: str, devices: pd.DataFrame | None, config: dict) -> Compute:
    """The family's jobs' own measurements (job records): wall and CPU hours, peak memory; GPU hours = the wall
    time of the training jobs whose runs trained on a GPU (train_stats.json's device); cores as the config
    requests them per job; the machines from train_stats.json's device names."""
    out = Compute()
    if benchmarks is not None and not benchmarks.empty:
        own = benchmarks[benchmarks["job"].str.contains(family, regex=False)
                         | benchmarks["rule"].str.contains(family, regex=False)]
        if not own.empty:
            out.jobs = len(own)
            out.wall_h = float(own["seconds"].sum()) / 3600
            out.cpu_h = float(own["cpu_seconds"].sum()) / 3600
            out.peak_rss_mb = float(own["max_rss_mb"].max())
            out.per_rule = (own.groupby("rule").agg(jobs=("seconds", "size"), wall_s=("seconds", "sum"),
                                                    cpu_s=("cpu_seconds", "sum"), rss_mb=("max_rss_mb", "max"))
                            .reset_index())
            if devices is not None and not devices.empty:
                gpu_methods = set(devices[devices["device"].astype(str).str.startswith("cuda")]["method"])
                train = own[own["rule"] == "train"]
                # family/dataset/setting/method, or .../method/seed<k> for a job of one seed (job_shape)
                on_gpu = train[[job.split("/")[3] in gpu_methods for job in train["job"]]]
                out.gpu_h = float(on_gpu["seconds"].sum()) / 3600
    resources = ((config.get("families") or {}).get(family) or {}).get("resources") or {}
    cpus, gpus = resources.get("cpus"), resources.get("gpu")
    out.cores_per_job = (f"{cpus} CPU core{'s' if cpus != 1 else ''}" if cpus else "not set") + (
        f", {gpus} GPU" if gpus else "")
    if devices is not None and not devices.empty:
        out.machines = [f"{name or dev} ({dev}): {int(group['runs'].sum())} runs"
                        for (dev, name), group in devices.groupby(["device", "device_name"], sort=True)]
    return out


def hours(value: float) -> str:
    """Hours with seconds in brackets below an hour, so small runs are still readable."""
    if value * 3600 < 600:
        return f"{value:.3f} h ({value * 3600:.0f} s)"
    return f"{value:.2f} h"
