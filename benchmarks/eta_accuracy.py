"""How good the run's ETA was: the ETA its progress lines showed at given shares of its wall time, against the time
that really remained (uqcal.pipeline.progress).

Reads a finished run's log: Snakemake's own (.snakemake/log/<date>.snakemake.log, the newest by default) or a
captured stderr. The run's wall time runs from its first progress line (less the elapsed time it states) to its
`done:` line; at each share, the last progress line at or before that moment is read.
    python benchmarks/eta_accuracy.py [LOG] [--at 0.25 0.5]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from uqcal.pipeline.progress.run import STAMP, format_duration, parse_line

_DONE = re.compile(r"\[progress (?P<stamp>[\d-]+ [\d:]+)\] done: ")


@dataclass(frozen=True)
class Reading:
    fraction: float  # share of the run's wall time
    at: float  # seconds since the run started, of the line read
    percent: float  # of estimated work, as the line said
    shown: float  # the ETA it showed, seconds
    actual: float  # the seconds that really remained after it


def eta_at_fractions(lines: list[str], fractions: tuple[float, ...]) -> list[Reading]:
    progress = [parsed for parsed in map(parse_line, lines) if parsed is not None]
    ends = [time.mktime(time.strptime(m["stamp"], STAMP)) for m in map(_DONE.search, lines) if m]
    if not progress or not ends:
        raise SystemExit("the log has no progress lines or no `done:` line (not a finished run with progress lines)")
    start, end = progress[0].at - progress[0].elapsed, ends[-1]
    readings = []
    for fraction in fractions:
        moment = start + fraction * (end - start)
        line = [p for p in progress if p.at <= moment][-1]
        readings.append(Reading(fraction, line.at - start, line.percent, line.eta, end - line.at))
    return readings


def newest_snakemake_log() -> Path:
    logs = sorted(Path(".snakemake/log").glob("*.snakemake.log"))
    if not logs:
        raise SystemExit("no .snakemake/log/*.snakemake.log here: give the log's path")
    return logs[-1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", nargs="?", type=Path, help="a finished run's log (default: the newest Snakemake log)")
    parser.add_argument("--at", nargs="+", type=float, default=[0.25, 0.5], help="shares of the run's wall time")
    args = parser.parse_args(argv)
    log = args.log or newest_snakemake_log()
    readings = eta_at_fractions(log.read_text(errors="replace").splitlines(), tuple(args.at))
    print(f"{log}")
    print(f"{'share of wall time':>18} | {'line at':>10} | {'work done':>9} | {'ETA shown':>10} | {'remained':>10} | error")
    for r in readings:
        error = (r.shown - r.actual) / r.actual if r.actual > 0 else float("nan")
        print(f"{r.fraction:>17.0%} | {format_duration(r.at):>10} | {r.percent:>8.0f}% | {format_duration(r.shown):>10} | "
              f"{format_duration(r.actual):>10} | {error:+.0%}")


if __name__ == "__main__":
    sys.exit(main())
