"""A local preload worker: `uqcal` commands fork from one process that has already imported torch & co.

Why: every Snakemake job is a fresh `uqcal` process, and importing torch, gpytorch, botorch, pandas,
scipy and scikit-learn costs 3-6 s of CPU per job -- about a sixth of the default run's CPU on 2 cores
(~235 jobs). With the worker, the Snakefile's ``onstart`` starts ``uqcal worker`` once for a local run and
exports its socket in ``UQCAL_WORKER``; each job's ``uqcal`` (a thin client that imports nothing heavy)
hands its argv, working directory, environment and stdin/stdout/stderr file descriptors to the worker,
which forks a child that runs ``uqcal.cli.main(argv)`` exactly as the process would have. The client
forwards SIGINT/SIGTERM/SIGHUP to the child and exits with its status, so Snakemake sees an ordinary job.

Safety rules this module relies on:
- the server never runs torch work and never initialises CUDA: forking a process with a live OpenMP
  pool or CUDA context breaks the child, so ``serve`` refuses to start if either exists after preload;
- every job seeds its own RNGs (``RunContext.seed_everything``, seeded split generators), so a forked
  child computes what a fresh process computes (tested in tests/test_worker.py);
- a client that cannot reach the worker (not started yet, gone, or on another host under SLURM) runs the
  command in its own process, so the worker is only ever an optimisation.

Snakemake's ``benchmark:`` files then measure the thin client, not the child; every command therefore
logs its own wall time, CPU time and peak memory as its last log line (``uqcal.cli``).
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from pathlib import Path

WORKER_ENV = "UQCAL_WORKER"

# What a job imports at start-up (measured with `python -X importtime`), plus every registered method.
PRELOAD = (
    "torch",
    "gpytorch",
    "botorch",
    "botorch.fit",
    "botorch.optim",
    "pandas",
    "pyarrow",
    "pyarrow.parquet",
    "scipy.special",
    "scipy.stats",
    "scipy.optimize",
    "sklearn.isotonic",
    "uqcal.api",
    "uqcal.cli",
    "uqcal.config",
    "uqcal.data",
    "uqcal.device",
    "uqcal.evaluation",
    "uqcal.io",
    "uqcal.resume",
    "uqcal.splits",
)
# What jobs import lazily once they run (the set difference of sys.modules before and after a train job of
# each family, after the preload above). torch.optim's first step imports torch._dynamo, which pulls in
# sympy and torch.distributed: ~800 modules, 2-3 s CPU in every job that uses a stock optimiser.
LAZY_PRELOAD = (
    "torch._dynamo",
    "pyarrow.dataset",
    "botorch.acquisition",
    "botorch.generation",
    "botorch.models",
    "botorch.optim.optimize",
    "botorch.sampling",
    "botorch.test_functions",
    "botorch.utils.multi_objective",
    "gpytorch.utils.cholesky",
    "sklearn.callback",  # newer scikit-learn only
    "rich.progress",
)

_HEADER = struct.Struct("!I")  # length prefix of the request JSON
_POLL_SECONDS = 1.0


# ------------------------------------------------------------------------------------------ client
def submit(argv: list[str], socket_path: str | None = None) -> int | None:
    """Run ``uqcal argv`` in the worker and return its exit status; None if no worker is reachable."""
    socket_path = socket_path or os.environ.get(WORKER_ENV)
    if not socket_path:
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(socket_path)
    except OSError:  # not started yet, already stopped, or another host: run in this process
        sock.close()
        return None
    with sock:
        env = {k: v for k, v in os.environ.items() if k != WORKER_ENV}
        request = json.dumps({"argv": list(argv), "cwd": os.getcwd(), "env": env}).encode()
        fds = [_open_fd(fd) for fd in (0, 1, 2)]
        try:
            socket.send_fds(sock, [_HEADER.pack(len(request)) + request], fds)
        except OSError:
            return None  # the worker went away between connect and send: nothing ran yet
        reply = sock.makefile("rb")
        first = _read_message(reply)
        if first is None or "pid" not in first:
            print("uqcal: the preload worker closed the connection before starting the job", file=sys.stderr)
            return 1
        child = int(first["pid"])
        previous = {sig: signal.signal(sig, _forwarder(child)) for sig in _FORWARDED}
        try:
            last = _read_message(reply)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if last is None or "rc" not in last:
            print(f"uqcal: job process {child} in the preload worker ended without a status (killed?)",
                  file=sys.stderr)
            return 1
        return int(last["rc"])


_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _forwarder(child: int):
    def forward(signum, _frame):
        try:
            os.kill(child, signum)
        except ProcessLookupError:
            pass

    return forward


def _open_fd(fd: int) -> int:
    try:
        os.fstat(fd)
        return fd
    except OSError:  # a closed stdin, say: hand over /dev/null instead
        return os.open(os.devnull, os.O_RDWR)


def _read_message(stream) -> dict | None:
    line = stream.readline()
    if not line:
        return None
    return json.loads(line)


# ------------------------------------------------------------------------------------------ server
def preload(modules: tuple[str, ...] = PRELOAD) -> list[str]:
    """Import the start-up modules and every registered method class; returns what was imported."""
    import torch

    # Before anything can run a parallel region: a forked child must not inherit an OpenMP thread pool.
    torch.set_num_threads(1)
    done = []
    for name in modules:
        importlib.import_module(name)
        done.append(name)
    if modules is PRELOAD:
        for name in LAZY_PRELOAD:
            try:
                importlib.import_module(name)
            except ImportError:  # a speed-up only: a library version without it costs a job its import
                continue
            done.append(name)
    from uqcal.api import FAMILIES, method_table

    for family in FAMILIES:
        for entry in method_table(family).values():
            entry.load_class()
            done.append(entry.target)
    return done


def fork_hazards() -> list[str]:
    """What would make forking this process unsafe for the children.

    Native thread pools that register fork handlers are fine and expected here: numpy's and scipy's
    OpenBLAS servers and pyarrow's jemalloc thread (torch's DataLoader forks with the same ones). Python
    threads and a CUDA context are not.
    """
    hazards = []
    extra_threads = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    if extra_threads:
        hazards.append(f"Python threads running: {extra_threads}")
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        hazards.append("CUDA is initialised")
    return hazards


def serve(socket_path: str, parent_pid: int | None = None, modules: tuple[str, ...] = PRELOAD,
          log=None) -> int:
    """Preload, then fork one child per client request until stopped or the parent process exits."""
    log = log or sys.stderr
    start = time.perf_counter()
    loaded = preload(modules)
    hazards = fork_hazards()
    if hazards:
        print(f"uqcal worker: not serving, forking would be unsafe: {'; '.join(hazards)}", file=log, flush=True)
        return 1
    path = Path(socket_path)
    path.unlink(missing_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(64)
    server.settimeout(_POLL_SECONDS)
    print(f"uqcal worker: {len(loaded)} modules preloaded in {time.perf_counter() - start:.1f} s; "
          f"serving on {path}", file=log, flush=True)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    served = 0
    try:
        while not stopping:
            _reap()
            if parent_pid is not None and os.getppid() != parent_pid:
                print("uqcal worker: parent process gone; stopping", file=log, flush=True)
                break
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except InterruptedError:
                continue
            served += 1
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:  # child: never returns
                server.close()
                _run_child(conn)
            conn.close()
    finally:
        server.close()
        path.unlink(missing_ok=True)
        print(f"uqcal worker: stopped after {served} jobs", file=log, flush=True)
    return 0


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
    (size,) = _HEADER.unpack_from(message)
    body = message[_HEADER.size:]
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            raise ConnectionError("client closed the connection mid-request")
        body += chunk
    return json.loads(body), fds


def _send(conn: socket.socket, message: dict) -> None:
    conn.sendall(json.dumps(message).encode() + b"\n")


def _run_child(conn: socket.socket) -> None:
    """In the forked child: become the client's process (fds, cwd, env, argv), run the command, exit."""
    rc = 1
    try:
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        request, fds = _receive(conn)
        for target, fd in zip((0, 1, 2), fds, strict=True):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = ["uqcal", *request["argv"]]
        _send(conn, {"pid": os.getpid()})
        # The client is the job as Snakemake sees it: if it goes away (killed), stop this job too.
        threading.Thread(target=_exit_with_client, args=(conn,), daemon=True).start()
        from uqcal.cli import main

        rc = _exit_status(main, request["argv"])
    except BaseException:  # noqa: BLE001 - report anything on the job's stderr, never return to the server loop
        traceback.print_exc()
        rc = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        try:
            _send(conn, {"rc": rc})
        except OSError:
            pass
        os._exit(rc)


def _exit_status(main, argv) -> int:
    try:
        rc = main(argv)
    except SystemExit as exc:
        if exc.code is None:
            return 0
        if isinstance(exc.code, int):
            return exc.code
        print(exc.code, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
    return int(rc or 0)


def _exit_with_client(conn: socket.socket) -> None:
    try:
        conn.recv(1)  # the client never sends more: this returns when it closes or dies
    except OSError:
        pass
    os.kill(os.getpid(), signal.SIGTERM)


# ------------------------------------------------------------------------------------------ Snakefile hooks
def start(log_path: str | os.PathLike, wait_seconds: float = 0.0) -> tuple[object, str]:
    """Start ``uqcal worker`` in the background (for the Snakefile's ``onstart``); returns (process, socket).

    The caller exports the socket in ``UQCAL_WORKER``. Jobs that start before the worker is ready simply run
    in their own process; ``wait_seconds`` > 0 waits that long for the socket.
    """
    import subprocess
    import tempfile

    socket_dir = tempfile.mkdtemp(prefix="uqcal-worker-")  # short path: AF_UNIX paths max ~107 bytes
    socket_path = os.path.join(socket_dir, "socket")
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "uqcal.cli", "worker", "--socket", socket_path, "--parent", str(os.getpid())],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
        )
    deadline = time.monotonic() + wait_seconds
    while time.monotonic() < deadline and not os.path.exists(socket_path) and process.poll() is None:
        time.sleep(0.1)
    return process, socket_path


def stop(process, socket_path: str) -> None:
    """Stop a worker from ``start`` (for ``onsuccess``/``onerror``); running jobs finish on their own."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except Exception:  # noqa: BLE001
            process.kill()
    Path(socket_path).unlink(missing_ok=True)
    try:
        os.rmdir(os.path.dirname(socket_path))
    except OSError:
        pass
