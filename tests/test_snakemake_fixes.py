"""Snakemake's scheduler re-evaluation timers: one pending at a time instead of one chain per job event."""

from __future__ import annotations

import threading
import time
import types

from snakemake.scheduling.job_scheduler import JobScheduler

from uqcal.snakemake_fixes import single_reevaluation_timer


def _timers_armed(schedule, calls: int) -> tuple[int, int]:
    """Call `schedule` `calls` times on a stand-in scheduler; returns (timer threads started, releases)."""
    fake = types.SimpleNamespace(_open_jobs=threading.Semaphore(0))
    before = threading.active_count()
    for _ in range(calls):
        schedule(fake, 0.2)
    started = threading.active_count() - before
    released = 0
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and released < calls:
        if fake._open_jobs.acquire(timeout=0.5):
            released += 1
        elif released:
            break
    return started, released


def test_the_stock_scheduler_arms_a_timer_per_call_and_the_patched_one_a_single_timer():
    original = JobScheduler._schedule_reevalutation
    try:
        stock = _timers_armed(original, 20)
        assert single_reevaluation_timer()
        assert single_reevaluation_timer()  # idempotent
        patched = _timers_armed(JobScheduler._schedule_reevalutation, 20)
    finally:
        JobScheduler._schedule_reevalutation = original
    assert stock == (20, 20)  # what made the chains: every call, one more wake-up
    assert patched == (1, 1)  # the loop is still re-run once the timespan has passed
