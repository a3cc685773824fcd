"""The run's progress line: cost estimates, the progress arithmetic, the ETA's format and the run's last lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from uqcal.core.io import write_json
from uqcal.pipeline.plan import Job
from uqcal.pipeline.progress.estimate import (
    STARTUP_SECONDS,
    Cost,
    PlannedJob,
    cost_book,
    estimate,
    params_digest,
    record_costs,
    reference_costs,
    write_reference,
)
from uqcal.pipeline.progress.run import (
    RunProgress,
    Snapshot,
    end_lines,
    format_duration,
    parse_duration,
    parse_line,
    progress_line,
    snapshot,
)

NN_CONCRETE = Job("train", ("rio", "concrete", "holdout", "nn"))
NN_DIAMONDS = Job("train", ("rio", "diamonds", "holdout", "nn"))
RIO_CONCRETE = Job("train", ("rio", "concrete", "holdout", "rio"))
BOOK = {
    NN_CONCRETE: [Cost(3.0, "p1"), Cost(0.5, "smoke")],
    NN_DIAMONDS: [Cost(5.0, "p2")],
    RIO_CONCRETE: [Cost(10.0, "p3")],
    Job("split", ("rio", "concrete", "holdout")): [Cost(2.0)],
    Job("materialise", ("concrete",)): [Cost(4.0)],
    Job("materialise", ("diamonds",)): [Cost(8.0)],
}


@pytest.mark.parametrize(("job", "units", "params", "seconds", "source"), [
    (NN_CONCRETE, 10, "p1", 3.0 * 10, "its record"),
    (NN_CONCRETE, 4, "smoke", 0.5 * 4, "its record"),  # the entry of its parameters
    (NN_CONCRETE, 10, None, 0.5 * 10, "its record"),  # parameters unknown: its last record is the best guess
    (NN_CONCRETE, 10, "p9", 3.0 * 10, "same method"),  # other parameters: the method's median of 0.5, 3, 5
    (Job("train", ("rio", "boston", "holdout", "rio")), 5, None, 10.0 * 5, "same method"),
    (Job("train", ("rio", "boston", "holdout", "svgp")), 2, None, (3.0 + 5.0) / 2 * 2, "same family"),  # 0.5 3 5 10
    (Job("train", ("qr", "boston", "cv5", "de")), 3, None, (3.0 + 5.0) / 2 * 3, "same rule"),
    (Job("materialise", ("boston",)), 1, None, (4.0 + 8.0) / 2, "same rule"),
    (Job("split", ("rio", "boston", "holdout")), 1, None, 2.0, "same family"),
    (Job("split", ("qr", "boston", "cv5")), 1, None, 2.0, "same rule"),
    (Job("aggregate", ("rio",)), 1, None, 2.0, "default"),
    (Job("report"), 1, None, 30.0, "default"),
])
def test_estimate_takes_the_closest_recorded_kin(job, units, params, seconds, source):
    found = estimate(PlannedJob(job, units=units, params=params), BOOK)
    assert (found.seconds, found.source) == (pytest.approx(seconds), source)


def _record(root: Path, job: Job, wall: float, seeds: list[int] | None = None, params: dict | None = None) -> None:
    write_json(root / job.rule / f"{job.name}.json",
               {"rule": job.rule, "key": list(job.key), "params": params or {},
                "job": {"seeds": seeds} if seeds is not None else {}, "resources": {"wall_seconds": wall}})


def test_record_costs_are_per_seed_and_override_the_reference(tmp_path):
    records = tmp_path / "records"
    _record(records, NN_CONCRETE, 30.0, seeds=[0, 1, 2, 3, 4], params={"lr": 0.1})
    _record(records, Job("report"), 18.0)
    (records / "train/rio/broken.json").write_text("{not json")
    costs = record_costs(records)
    assert costs == {NN_CONCRETE: Cost(30.0 / 5, params_digest({"lr": 0.1}), None, 5),
                     Job("report"): Cost(18.0, params_digest({}))}

    reference = tmp_path / "reference.yaml"
    default_run = {NN_CONCRETE: Cost(99.0, "old", None, 10), RIO_CONCRETE: Cost(7.0, None), Job("report"): Cost(20.0, "r")}
    smoke_run = {NN_CONCRETE: Cost(1.0, "smoke"), Job("report"): Cost(5.0, "r")}
    write_reference([default_run, smoke_run], reference)
    assert reference_costs(reference) == {NN_CONCRETE: [Cost(99.0, "old", None, 10), Cost(1.0, "smoke")],
                                          RIO_CONCRETE: [Cost(7.0, None)], Job("report"): [Cost(5.0, "r")]}
    book = cost_book(records, reference)
    assert book[NN_CONCRETE] == [Cost(99.0, "old", None, 10), Cost(1.0, "smoke"), costs[NN_CONCRETE]]
    assert book[RIO_CONCRETE] == [Cost(7.0, None)]


def test_a_record_costs_its_cpu_seconds_not_its_wall_time(tmp_path):
    # A loaded machine stretches a job's wall time, not its CPU time (benchmarks/run_cost.py sums CPU seconds).
    write_json(tmp_path / "train" / f"{NN_CONCRETE.name}.json",
               {"rule": "train", "key": list(NN_CONCRETE.key), "params": {}, "job": {"seeds": [0, 1]},
                "resources": {"wall_seconds": 90.0, "cpu_seconds": 30.0}})
    assert record_costs(tmp_path)[NN_CONCRETE].seconds_per_unit == pytest.approx(15.0)


def test_scaling_by_work_leaves_the_start_up_unscaled():
    # A smoke job: 2 seeds of work 1 in 3 + 2 x 2 = 7 CPU s (a start-up of STARTUP_SECONDS = 3 s, then 2 s a
    # seed); a paper job of 3 seeds of work 1000 costs 3 + 3 x 1000 x 2 s, not 7 / 2 x 1000 x 3 s.
    smoke = Job("train", ("fewshot", "tiny", "5w5s", "md"))
    book = {smoke: [Cost((STARTUP_SECONDS + 2 * 2.0) / 2, "smoke", 1.0, 2)]}
    paper = PlannedJob(Job("train", ("fewshot", "cub", "5w1s", "md")), units=3, params="paper", work=1000.0)
    found = estimate(paper, book)
    assert found.source == "same method, scaled by work"
    assert found.seconds == pytest.approx(STARTUP_SECONDS + 3 * 1000 * 2.0)


def test_the_shipped_reference_has_a_cost_for_every_job_of_the_default_config():
    from uqcal.pipeline.config.load import load_config
    from uqcal.pipeline.plan import plan

    reference = reference_costs()
    missing = [job for job in plan(load_config("config/config.yaml")) if job not in reference]
    assert not missing, f"reference_costs.yaml lacks {missing[:5]}: python -m uqcal.pipeline.progress reference ..."


A, B, C, D = (Job("train", ("f", "d", "s", m)) for m in "abcd")


def test_snapshot_matches_a_hand_computation():
    estimated = {A: 100.0, B: 50.0, C: 200.0, D: 40.0}
    threads = {B: 2}
    snap = snapshot(estimated, threads, finished={A: 150.0}, running={B: 20.0}, elapsed=170.0, capacity=2)
    # estimated work 100 + 50*2 + 200 + 40 = 440, prior 10 % of it = 44; A took 150 s against 100 estimated.
    speed = (150 + 44) / (100 + 44)
    to_go_b = 50 * speed - 20  # B has run 20 s of its 50 * speed
    remaining = 200 * speed + 40 * speed + 2 * to_go_b
    done = 150 + 2 * 20
    assert snap.speed == pytest.approx(speed)
    assert snap.percent == pytest.approx(100 * done / (done + remaining))
    # 2 cores would finish the work in remaining / 2 s, but C alone takes longer on one core.
    assert remaining / 2 < 200 * speed
    assert snap.eta == pytest.approx(200 * speed)
    assert (snap.done, snap.running, snap.total, snap.elapsed) == (1, 1, 4, 170.0)


def test_snapshot_divides_many_small_jobs_by_the_cores_and_keeps_an_overrun_job_alive():
    estimated = {A: 10.0, B: 10.0, C: 10.0, D: 100.0}
    snap = snapshot(estimated, {}, finished={}, running={D: 300.0}, elapsed=300.0, capacity=2)
    # Nothing finished: speed 1. D ran 300 s of its 100: a tenth of its elapsed time is still to go.
    assert snap.speed == 1.0
    assert snap.eta == pytest.approx(max((10 + 10 + 10 + 0.1 * 300) / 2, 0.1 * 300))
    snap = snapshot(estimated, {}, finished={}, running={}, elapsed=0.0, capacity=2)
    assert snap.eta == pytest.approx(max(130 / 2, 100)) and snap.percent == 0.0
    done = snapshot(estimated, {}, finished=dict.fromkeys(estimated, 5.0), running={}, elapsed=20.0, capacity=2)
    assert (done.percent, done.eta, done.done) == (100.0, 0.0, 4)


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0 s"), (59.4, "59 s"), (60, "1 min 0 s"), (260, "4 min 20 s"), (599.6, "10 min"), (1380, "23 min"),
    (3599, "1 h 00 min"), (7500, "2 h 05 min"),
])
def test_durations_read_as_words_and_back(seconds, text):
    assert format_duration(seconds) == text
    assert parse_duration(text) == pytest.approx(seconds, abs=30 if seconds >= 600 else 0.5)


def test_a_progress_line_reads_back():
    now = time.mktime((2026, 11, 27, 20, 41, 3, 0, 0, -1))
    line = progress_line(Snapshot(37.4, 12, 2, 58, 363.0, 480.0, 1.1), now)
    assert line == ("[progress 2026-11-27 20:41:03] 37 % of estimated work, 12 of 58 jobs done, 2 running, "
                    "elapsed 6 min 3 s, ETA 8 min 0 s")
    parsed = parse_line(f"some prefix {line}")
    assert (parsed.at, parsed.percent, parsed.done, parsed.total, parsed.elapsed, parsed.eta) == \
        (now, 37.0, 12, 58, 363.0, 480.0)
    assert parse_line("[Fri Nov 27 20:35:16 2026] localrule materialise:") is None


def test_end_lines_name_the_report_and_count_the_claims(tmp_path):
    reports = tmp_path / "reports"
    assert end_lines(reports) == []  # no report (e.g. a run of one family's summary): nothing to point to
    reports.mkdir()
    (reports / "index.html").write_text("<html></html>")
    assert end_lines(reports) == [f"Report: {reports.as_posix()}/index.html ({(reports / 'index.html').as_uri()})"]
    write_json(reports / "claims_summary.json", {
        "rio": {"a": "contradicted", "b": "reproduced", "c": "not_run"},
        "qr": {"d": "reproduced", "e": "undecided", "f": "not_run", "g": "not_run"},
    })
    headline = end_lines(reports)[1]
    assert headline.startswith("Claims: ") and headline.endswith(" (7 claims of 2 papers)")
    counts = headline.removeprefix("Claims: ").rsplit(" (", 1)[0].split(", ")
    assert set(counts) == {"2 reproduced", "1 contradicted", "1 undecided", "3 not run"}
    assert counts[-1] == "3 not run"
    # our own checks (a claim's `ours`) are counted apart from the papers' claims
    write_json(reports / "checks_summary.json", {"rio": {"h": "generalises"}, "qr": {}})
    assert end_lines(reports)[2] == "Our checks: 1 generalises (1 check of 2 papers)"


def test_run_progress_follows_records_and_locks(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    clock = [1_000_000.0]
    lines: list[str] = []
    progress = RunProgress([PlannedJob(A), PlannedJob(B), PlannedJob(Job("report"))], 2, lines.append,
                           book={A: [Cost(60.0)], B: [Cost(60.0)], Job("report"): [Cost(10.0)]}, clock=lambda: clock[0])
    # An old record (an earlier run's, dated 1970 as current records are) is not this run's.
    _record(Path(".uqcal/records"), B, 1.0)
    os.utime(B.record_path, (1, 1))
    clock[0] += 30
    _record(Path(".uqcal/records"), A, 45.0)
    Path(B.lock_path).parent.mkdir(parents=True, exist_ok=True)
    Path(B.lock_path).write_text("123\n")
    os.utime(A.record_path, (clock[0], clock[0]))
    os.utime(B.lock_path, (clock[0] - 10, clock[0] - 10))
    snap = progress.observe()
    assert (snap.done, snap.running, snap.total, snap.elapsed) == (1, 1, 3, 30.0)
    assert progress.finished == {A: 45.0}

    (tmp_path / "reports").mkdir()
    (tmp_path / "reports/index.html").write_text("<html></html>")
    progress.start(interval=0)
    progress.finish()
    assert [line.split("]")[0].split(" ")[0] for line in lines[:2]] == ["[progress", "[progress"]
    assert parse_line(lines[0]).done == 1
    assert "done: 1 of 3 jobs in 30 s" in lines[1]
    assert lines[2].startswith("Report: reports/index.html (file://")


def test_the_thread_says_lines_at_its_interval_until_stopped(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    lines: list[str] = []
    progress = RunProgress([PlannedJob(A)], 1, lines.append, book={}).start(interval=0.05)
    deadline = time.monotonic() + 5
    while len(lines) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    progress.stop()
    count = len(lines)
    time.sleep(0.15)
    assert count >= 3 and len(lines) == count
    assert all(parse_line(line) is not None for line in lines)


def test_eta_accuracy_reads_a_log(tmp_path):
    from benchmarks.eta_accuracy import eta_at_fractions

    start = time.mktime((2026, 11, 27, 20, 0, 0, 0, 0, -1))
    log = []
    for minute, eta in [(0, 50), (10, 35), (20, 25), (30, 12), (40, 2)]:
        snap = Snapshot(minute * 2.0, minute, 1, 50, minute * 60.0, eta * 60.0, 1.0)
        log.append(progress_line(snap, start + 60 * minute))
    end = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(start + 2400))
    log.append(f"[progress {end}] done: 50 of 50 jobs in 40 min")
    (tmp_path / "run.log").write_text("\n".join(["Building DAG of jobs...", *log, "Complete log(s): x"]) + "\n")
    rows = eta_at_fractions((tmp_path / "run.log").read_text().splitlines(), (0.25, 0.5))
    # 25 % of 40 min is minute 10: the line there says 35 min to go, 30 were left; 50 %: minute 20, 25 said, 20 left.
    assert [(r.fraction, r.shown, r.actual) for r in rows] == [(0.25, 35 * 60.0, 30 * 60.0), (0.5, 25 * 60.0, 20 * 60.0)]
    assert json.dumps([r.fraction for r in rows]) == "[0.25, 0.5]"


@pytest.mark.slow  # reads the smoke pipeline's run (tests/conftest.py's smoke_run, shared with tests/e2e)
def test_the_smoke_run_logs_progress_and_ends_with_the_report(smoke_run, monkeypatch):
    from benchmarks.eta_accuracy import eta_at_fractions

    # The fixture's run is the repo's first Snakemake log (named by its start time); tests sharing the run call
    # Snakemake there again (--summary, dry runs), whose later logs hold no progress line.
    log = sorted((smoke_run / ".snakemake/log").glob("*.snakemake.log"))[0].read_text().splitlines()
    progress = [parsed for parsed in map(parse_line, log) if parsed is not None]
    assert progress, "no [progress] line in the smoke run's log"
    total = progress[0].total
    assert total > 10 and progress[0].done == 0
    done = [i for i, line in enumerate(log) if "] done: " in line]
    assert done and f"done: {total} of {total} jobs" in log[done[-1]]
    assert log[done[-1] + 1].startswith("Report: reports/index.html (file://")
    assert log[done[-1] + 2].startswith("Claims: ")
    assert [r.fraction for r in eta_at_fractions(log, (0.25, 0.5))] == [0.25, 0.5]
    # After the run nothing is stale: a `dvc repro` watcher started now would follow no job. Asked in a fresh
    # process, as the watcher is: this test process may hold plug-in families other tests registered.
    probe = ("from uqcal.pipeline.config.load import load_config\n"
             "from uqcal.pipeline.progress.__main__ import pending_jobs\n"
             "print([str(p) for p in pending_jobs(load_config('config/smoke.yaml'), 'config/smoke.yaml')])")
    out = subprocess.run([sys.executable, "-c", probe], cwd=smoke_run, capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout + out.stderr
