"""Work-arounds for Snakemake behaviour that costs a long local run real CPU (applied by the Snakefile).

Snakemake 9 rate-limits job starts by default (`--max-jobs-per-timespan 100/1s`), and at the end of every
pass of its scheduling loop it arms a `threading.Timer` that re-runs the loop after the timespan. The timer's
own pass arms the next one, so every job event (a start, a finish) adds a timer chain that never ends: on the
default run (225 jobs) ~25 scheduling passes/s and ~16,000 threads a third of the way in, and 433 CPU s in
Snakemake's process over the run (measured), 12 % of the whole run's CPU. One pending re-evaluation at a time
keeps what the timer is for (re-check once the rate limit's window has passed) without the chains.
"""

from __future__ import annotations

import threading


def single_reevaluation_timer() -> bool:
    """Patch Snakemake's JobScheduler to keep at most one pending re-evaluation timer.

    Returns False (and changes nothing) when this Snakemake has no such method, e.g. a version that fixed it.
    """
    try:
        from snakemake.scheduling.job_scheduler import JobScheduler
    except ImportError:
        return False
    original = getattr(JobScheduler, "_schedule_reevalutation", None)  # sic: Snakemake's spelling
    if original is None:
        return False
    if getattr(original, "uqcal_single_timer", False):
        return True

    def schedule_reevaluation(self, delay) -> None:
        pending = getattr(self, "_uqcal_reevaluation", None)
        if pending is not None and pending.is_alive():
            return  # a re-evaluation is already due within `delay`: it re-runs the loop, which re-arms
        timer = threading.Timer(delay, self._open_jobs.release)
        timer.daemon = True  # never keep a finished Snakemake waiting for its last timer
        timer.start()
        self._uqcal_reevaluation = timer

    schedule_reevaluation.uqcal_single_timer = True
    JobScheduler._schedule_reevalutation = schedule_reevaluation
    return True
