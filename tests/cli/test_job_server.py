"""The local job server (uqcal.cli.job_server): a command forked from it prints, exits and is stopped as in a
process of its own, and a request it cannot serve exactly is refused (the step then runs itself).

Each test talks to a real server in a temporary checkout, through a client in a process of its own (the client
installs signal handlers). `validate-config` stands in for a step: the server runs any `uqcal` command line it is
sent; which ones a step sends is `serves`' policy, tested on its own. The smoke run (tests/conftest.py) is served
end to end: its numbers and records are checked there.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import BIN, REPO

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the job server is Linux-only (abstract sockets)")

CLIENT = """
import json, os, signal, sys
from uqcal.cli import job_server
argv, then = json.loads(sys.argv[1]), sys.argv[2]
def started(pid):
    print(f"PID {pid}", file=sys.stderr, flush=True)
    if then == "drop":
        os._exit(9)  # the step's process dies without a word: the server must not leave its job behind
    if then == "term":
        os.kill(os.getpid(), signal.SIGTERM)  # how Snakemake ends a job: to the step's process
status = job_server.run_through_server(argv, on_started=started)
print(f"STATUS {status}", file=sys.stderr, flush=True)
"""


def _env(src: Path, **extra) -> dict[str, str]:
    # PYTEST_CURRENT_TEST: pytest sets it per test, and a server compares a request's whole environment
    dropped = ("UQCAL_JOB_SERVER", "SLURM_JOB_ID", "PYTEST_CURRENT_TEST")
    env = {key: value for key, value in os.environ.items() if key not in dropped}
    env.update(PYTHONPATH=str(src), OMP_NUM_THREADS="1", **extra)
    return env


def _client(root: Path, src: Path, argv: list[str], then: str = "wait", **extra) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CLIENT, json.dumps(argv), then], cwd=root, env=_env(src, **extra),
                          capture_output=True, text=True, timeout=300)


def _blocked_command(root: Path) -> list[str]:
    """A command whose process waits until someone writes to its config (a FIFO): it is certainly still running
    when the test acts on it."""
    fifo = root / "blocked.yaml"
    if not fifo.exists():
        os.mkfifo(fifo)
    return ["validate-config", "--config", fifo.name]


def _status(proc: subprocess.CompletedProcess) -> str:
    return proc.stderr.strip().splitlines()[-1]


def _stop(root: Path, src: Path) -> None:
    subprocess.run([sys.executable, "-c", "from uqcal.cli.job_server import stop_server; stop_server(20)"],
                   cwd=root, env=_env(src), check=True, timeout=60)


def _accounts(root: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((root / ".uqcal/job-server").glob("*.json"))]


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    """A checkout's config, and a server for it (started by the first request); stopped at the end."""
    root = tmp_path_factory.mktemp("served")
    shutil.copytree(REPO / "config", root / "config")
    yield root
    _stop(root, REPO / "src")


def test_a_served_command_prints_and_exits_as_in_its_own_process(checkout):
    for argv in (["validate-config", "--config", "config/smoke.yaml"],
                 ["validate-config", "--config", "config/missing.yaml"]):
        own = subprocess.run([str(BIN / "uqcal"), *argv], cwd=checkout, env=_env(REPO / "src"), capture_output=True,
                             text=True, timeout=300)
        served = _client(checkout, REPO / "src", argv)
        assert own.returncode in (0, 2)
        assert _status(served) == f"STATUS {own.returncode}", served.stderr
        assert "PID " in served.stderr, "the command ran in this process, not in one the server forked"
        assert served.stdout == own.stdout
        assert own.stderr.strip() in served.stderr  # the error line, on the client's own stderr


def test_a_request_from_another_environment_is_refused(checkout):
    _client(checkout, REPO / "src", ["validate-config", "--config", "config/smoke.yaml"])  # a server is up
    served = _client(checkout, REPO / "src", ["validate-config", "--config", "config/smoke.yaml"],
                     UQCAL_TEST_VARIABLE="x")
    assert _status(served) == "STATUS None"
    assert "another environment (UQCAL_TEST_VARIABLE)" in served.stderr


def test_a_dropped_step_takes_its_job_with_it(checkout):
    dropped = _client(checkout, REPO / "src", _blocked_command(checkout), then="drop")
    assert dropped.returncode == 9
    pid = int(dropped.stderr.split("PID ")[1].split()[0])
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = Path(f"/proc/{pid}").exists()
    if alive:
        os.kill(pid, signal.SIGKILL)
    assert not alive, "the job outlived the step that asked for it"


def test_a_changed_source_file_retires_the_server(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(REPO / "src", src, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "config", tmp_path / "config")
    argv = ["validate-config", "--config", "config/smoke.yaml"]
    first = _client(tmp_path, src, argv)
    assert _status(first) == "STATUS 0" and "PID " in first.stderr, first.stderr
    cli = src / "uqcal/cli/__init__.py"
    cli.write_text(cli.read_text() + "\n# edited\n")  # a file the server has loaded
    second = _client(tmp_path, src, argv)
    assert _status(second) == "STATUS None"
    assert f"{cli} changed since the server loaded it" in second.stderr
    deadline = time.monotonic() + 20
    while not _accounts(tmp_path) and time.monotonic() < deadline:  # retired: it exits once idle
        time.sleep(0.1)
    [account] = _accounts(tmp_path)
    assert account["jobs_served"] == 1 and account["requests_refused"] == 1 and "changed" in account["retired"]
    assert account["resources"]["cpu_seconds"] >= account["preload_cpu_seconds"] > 0


def test_stopping_writes_the_servers_account(tmp_path):
    shutil.copytree(REPO / "config", tmp_path / "config")
    for _ in range(2):
        assert _status(_client(tmp_path, REPO / "src", ["validate-config", "--config", "config/smoke.yaml"])) \
            == "STATUS 0"
    _stop(tmp_path, REPO / "src")
    [account] = _accounts(tmp_path)
    assert account["jobs_served"] == 2 and account["retired"] is None
    assert "torch" in account["preload"]


@pytest.mark.parametrize(("argv", "env", "served"), [
    (["train", "--spec", "s.json"], {"UQCAL_JOB_SERVER": "1"}, True),
    (["report", "--spec=s.json"], {"UQCAL_JOB_SERVER": "1"}, True),
    (["train", "--spec", "s.json"], {"UQCAL_JOB_SERVER": "0"}, False),
    (["train", "--spec", "s.json"], {}, False),
    (["train", "--config", "config/config.yaml", "--family", "qr"], {"UQCAL_JOB_SERVER": "1"}, False),  # people
    (["validate-config"], {"UQCAL_JOB_SERVER": "1"}, False),  # not a step
    (["train", "--spec", "s.json"], {"UQCAL_JOB_SERVER": "1", "SLURM_JOB_ID": "42"}, False),  # a batch job
])
def test_which_command_lines_go_through_the_server(argv, env, served):
    from uqcal.cli.job_server import serves

    assert serves(argv, env) is (served and sys.platform == "linux")


def test_signals_reach_the_job(checkout):
    """SIGTERM to the step's process (how Snakemake ends a job) ends the forked job: status 128 + 15."""
    proc = _client(checkout, REPO / "src", _blocked_command(checkout), then="term")
    assert _status(proc) == f"STATUS {128 + signal.SIGTERM}", proc.stderr


def test_a_forked_job_takes_the_parents_of_the_step_that_asked_for_it(monkeypatch):
    """uqcal.pipeline.locks.ancestry in a forked job: the step's process's parent and grandparent (the shell and
    Snakemake), as in the step's own process; none once that process is gone (the job is then an orphan)."""
    from uqcal.cli import job_server
    from uqcal.pipeline import locks

    step = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        monkeypatch.setattr(job_server, "FORKED", True)
        monkeypatch.setattr(job_server, "CLIENT_PID", step.pid)
        assert locks.ancestry() == [os.getpid(), os.getppid()]
        started_under = locks.ancestry()
    finally:
        step.kill()
        step.wait()
    assert locks.ancestry() == []
    assert locks.orphaned(started_under)
