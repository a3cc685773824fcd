"""The preload worker: a job forked from it behaves and computes exactly like a fresh `uqcal` process."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import BIN, REPO, copy_repo, tool_env
from uqcal import worker


def uqcal(args, cwd, socket_path=None, **kw):
    env = tool_env()
    env.pop(worker.WORKER_ENV, None)
    if socket_path:
        env[worker.WORKER_ENV] = socket_path
    return subprocess.run([str(BIN / "uqcal"), *args], cwd=cwd, env=env, capture_output=True, text=True, **kw)


@pytest.fixture(scope="module")
def running_worker(tmp_path_factory):
    root = copy_repo(tmp_path_factory.mktemp("worker") / "repo")
    old_cwd = os.getcwd()
    os.chdir(root)
    try:
        process, socket_path = worker.start(root / "logs/worker.log", wait_seconds=120)
    finally:
        os.chdir(old_cwd)
    assert os.path.exists(socket_path), (root / "logs/worker.log").read_text()
    yield root, socket_path, process
    worker.stop(process, socket_path)
    assert process.poll() is not None
    assert not os.path.exists(socket_path)


def test_output_and_exit_status_pass_through_unchanged(running_worker):
    root, socket_path, _ = running_worker
    for args in (["validate-config", "--config", "config/smoke.yaml"],  # rc 0, stdout
                 ["validate-config", "--config", "config/missing.yaml"],  # rc 2, stderr
                 ["train", "--family", "bo"]):  # argparse/SystemExit message, rc 1
        direct, forked = uqcal(args, root), uqcal(args, root, socket_path)
        assert (forked.returncode, forked.stdout, _untimed(forked.stderr)) == \
            (direct.returncode, direct.stdout, _untimed(direct.stderr))
    assert direct.returncode != 0
    log = (root / "logs/worker.log").read_text()
    assert re.search(r"\d+ modules preloaded", log)


def _untimed(stderr: str) -> str:
    """stderr without the closing resource line (its times differ from run to run)."""
    return "".join(line for line in stderr.splitlines(True) if not re.search(r"uqcal \w+: [0-9.]+ s wall", line))


def test_unreachable_worker_falls_back_to_running_in_process(tmp_path):
    proc = uqcal(["validate-config", "--config", "config/smoke.yaml"], REPO, str(tmp_path / "no-such-socket"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip()


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_stopping_the_client_stops_its_job(running_worker, tmp_path, how):
    root, socket_path, server = running_worker
    # A job that blocks: its config is a FIFO that nobody writes (a plain open() waits for a writer).
    os.mkfifo(tmp_path / "config.yaml")
    env = tool_env()
    env[worker.WORKER_ENV] = socket_path
    client = subprocess.Popen(
        [str(BIN / "uqcal"), "validate-config", "--config", str(tmp_path / "config.yaml")],
        cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    job = _wait_for(lambda: _children(server.pid))
    assert job, "the worker forked no child for the job"
    time.sleep(1.0)
    assert client.poll() is None, client.communicate()  # blocked on the FIFO, as intended
    assert _children(server.pid) == job
    client.send_signal(how)
    rc = client.wait(timeout=30)
    assert rc != 0
    assert _wait_for(lambda: not _children(server.pid)), "the job outlived its client"


def _wait_for(condition, seconds: float = 30.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    return condition()


def _children(pid: int) -> set[int]:
    """Live (non-zombie) child processes of ``pid``, from /proc."""
    children = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        state, ppid = stat[stat.rindex(")") + 2:].split()[:2]
        if int(ppid) == pid and state != "Z":
            children.add(int(proc.name))
    return children


def test_smoke_run_went_through_the_worker_and_matches_a_fresh_process(smoke_run, tmp_path):
    log = (smoke_run / "logs/worker.log").read_text()
    served = int(re.search(r"stopped after (\d+) jobs", log).group(1))
    assert served > 10, log
    # Recompute one forked job's runs in a fresh process (no worker) and compare the metrics byte for byte.
    args = ["--results-dir", str(tmp_path), "train", "--config", "config/smoke.yaml", "--family", "metareg",
            "--dataset", "ozone", "--setting", "ns10", "--method", "metacal"]
    proc = uqcal(args, smoke_run)
    assert proc.returncode == 0, proc.stderr
    fresh = sorted(tmp_path.glob("metareg/ozone/ns10/metacal/seed*/metrics.json"))
    assert fresh
    for path in fresh:
        forked = smoke_run / "results" / path.relative_to(tmp_path)
        assert json.loads(path.read_text()) == json.loads(forked.read_text())


def test_a_running_python_thread_is_a_fork_hazard():
    import threading

    release = threading.Event()
    thread = threading.Thread(target=release.wait, name="busy-helper")
    thread.start()
    try:
        assert any("busy-helper" in hazard for hazard in worker.fork_hazards())
    finally:
        release.set()
        thread.join()
    assert not any("busy-helper" in hazard for hazard in worker.fork_hazards())


def test_preload_covers_what_a_stock_optimiser_step_imports():
    # torch.optim's first step imports torch._dynamo (and with it sympy, ~800 modules): without it in the
    # preload, every forked job paid 2-3 s of imports.
    code = (
        "import sys, torch\n"
        "from uqcal import worker\n"
        "worker.preload()\n"
        "before = set(sys.modules)\n"
        "weight = torch.nn.Parameter(torch.ones(3))\n"
        "optimiser = torch.optim.Adam([weight], lr=0.1)\n"
        "(weight ** 2).sum().backward()\n"
        "optimiser.step()\n"
        "print(len(set(sys.modules) - before))\n"
    )
    proc = subprocess.run([str(BIN / "python"), "-c", code], env=tool_env(), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout.strip()) < 20
