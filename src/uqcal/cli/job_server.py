"""A local run's job server: the libraries every pipeline step imports, loaded once, and each step forked from them.

A default run starts ~115 `uqcal` processes, and each spends 4-5.5 CPU s importing torch, torch._dynamo,
gpytorch, scikit-learn, scipy and pandas before its first line of work (docs/pipeline.md, "Job server"): about
a fifth of the run's CPU. Under Snakemake's local executor (workflow/rules/common.smk sets
``UQCAL_JOB_SERVER=1``), the first step of a run starts this server in the background; every step then asks it to
run the step's command line in a process forked from the loaded libraries, and waits for its exit status.

- **The same job.** The forked process runs ``uqcal.cli.main`` on the step's own command line, working
  directory and standard streams (passed over the socket), under the same environment (a request from a
  different one is refused), so its outputs, log and record are what the step's own process writes. Only uqcal's
  own modules load in the forked process, as they would in a fresh one (the server loads none of the steps').
- **Refused, then run as usual.** A request the server cannot serve exactly (another environment, numerics mode,
  directory or user; a loaded file changed on disk since the server loaded it) is refused with the reason, and
  the step runs in its own process as without a server; so does a step that finds no server it can start. The
  server stops taking requests once a file it loaded has changed, and the next step starts a fresh one.
- **Stopping.** The step's process forwards SIGINT, SIGTERM, SIGHUP and SIGQUIT to the forked job; if the step's
  process is killed outright, the server kills the job (SIGKILL) as soon as the connection drops. The server
  exits ``IDLE_SECONDS`` after its last job, or on SIGTERM (its jobs terminated first).
- **Accounting.** A forked job's record states its own CPU; the server's (its imports, once, and its forks) is
  written at exit to ``.uqcal/job-server/<host>-<pid>.json`` (benchmarks/run_cost.py adds it to the run).
- **Never on a cluster.** Not inside a batch job (``SLURM_JOB_ID`` and the like), and the Snakefile enables it
  for local execution only: a server shared by jobs of different allocations would outlive the one that
  started it. The socket is a Linux abstract one, named from the checkout, the interpreter and ``PYTHONPATH``,
  and both ends check the other's user id.

This module is imported by ``uqcal.cli`` only by name (``importlib``), so it is no job's code dependency: it
hosts a step's process and computes nothing a step writes.
"""

from __future__ import annotations

import contextlib
import datetime
import gc
import hashlib
import json
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

ENV_VARIABLE = "UQCAL_JOB_SERVER"   # "1": steps go through the server (set by workflow/rules/common.smk)
IDLE_SECONDS = 30.0                 # a default run's steps start within a second of each other's end
CONNECT_SECONDS = 10.0              # how long a step waits for a server it started to listen
STATE_DIR = Path(".uqcal") / "job-server"
# Inside one of these, the job's allocation ends with it: a server there would die with the first job's (or,
# shared by jobs of several allocations on one node, take their jobs with it).
BATCH_VARIABLES = ("SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "JOB_ID", "FLUX_JOB_ID")
# What a shell sets per process; the rest of a request's environment must equal the server's.
UNCOMPARED_ENV = frozenset({"_", "PWD", "OLDPWD", "SHLVL"})
# The third-party libraries the steps import (each step's own uqcal modules load in its forked process).
PRELOAD = ("numpy", "scipy.stats", "scipy.optimize", "pandas", "pyarrow.parquet", "yaml", "torch", "torch._dynamo",
           "sklearn.base", "sklearn.isotonic", "sklearn.model_selection", "gpytorch", "botorch")
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
FORKED = False  # true in a job the server forked (uqcal.pipeline.records.resource_usage says so in its record)
CLIENT_PID: int | None = None  # there, the step's process that asked for it (uqcal.pipeline.locks.ancestry)


def _compared_env(env: dict[str, str]) -> dict[str, str]:
    return {key: value for key, value in env.items() if key not in UNCOMPARED_ENV}


def socket_name(cwd: str | None = None, env: dict[str, str] | None = None) -> str:
    """The abstract socket of the server for this checkout, interpreter and ``PYTHONPATH`` (and user)."""
    env = os.environ if env is None else env
    key = json.dumps([os.path.realpath(cwd or os.getcwd()), sys.executable, env.get("PYTHONPATH", ""), os.getuid()])
    return f"\0uqcal-job-server-{hashlib.sha256(key.encode()).hexdigest()[:32]}"


def serves(argv: list[str], env: dict[str, str] | None = None) -> bool:
    """Whether the ``uqcal`` command line ``argv`` goes through the job server: a pipeline step run from its
    ``--spec`` (the Snakefile's jobs), with ``UQCAL_JOB_SERVER=1``, on Linux, outside a batch system's job."""
    from uqcal.cli import STEPS

    env = os.environ if env is None else env
    return (env.get(ENV_VARIABLE) == "1" and sys.platform == "linux" and bool(argv) and argv[0] in STEPS
            and any(arg == "--spec" or arg.startswith("--spec=") for arg in argv)
            and not any(env.get(name) for name in BATCH_VARIABLES))


# ------------------------------------------------------------------------------------------ client
def _peer(sock: socket.socket) -> tuple[int, int]:
    """The process id and user id of the other end of ``sock`` (SO_PEERCRED)."""
    pid, uid, _ = _PEERCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
    return pid, uid


def _connect(name: str) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(name)
    except OSError:
        sock.close()
        return None
    return sock


def _start_server(argv: list[str]) -> None:
    """Start a server in the background (its own session, so a run's Ctrl-C reaches it through its jobs only)."""
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    log = open(STATE_DIR / f"{socket.gethostname()}.log", "ab")  # noqa: SIM115 - handed to the server
    with log:
        subprocess.Popen([sys.executable, "-m", "uqcal.cli.job_server", *argv], stdin=subprocess.DEVNULL,
                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)


def _readline(sock: socket.socket, buffer: bytearray) -> dict | None:
    while b"\n" not in buffer:
        chunk = sock.recv(4096)
        if not chunk:
            return None
        buffer += chunk
    line, _, rest = bytes(buffer).partition(b"\n")
    buffer[:] = rest
    return json.loads(line)


def run_through_server(argv: list[str], on_started=None) -> int | None:
    """Run the ``uqcal`` command line ``argv`` in a process forked by this checkout's job server, starting one if
    none listens; return its exit status (128 + N for a job ended by signal N), or None when it was not run
    there (no server could be reached, or it refused: the reason is printed), so the caller runs it itself.
    ``on_started(pid)`` is called with the forked job's process id (tests)."""
    name = socket_name()
    sock = _connect(name)
    if sock is None:
        try:
            _start_server(argv)
        except OSError as exc:
            print(f"uqcal: job server not started ({exc}); running in this process", file=sys.stderr)
            return None
        deadline = time.monotonic() + CONNECT_SECONDS
        while sock is None and time.monotonic() < deadline:
            time.sleep(0.02)
            sock = _connect(name)
        if sock is None:
            print("uqcal: no job server to reach; running in this process", file=sys.stderr)
            return None
    with sock:
        if _peer(sock)[1] != os.getuid():
            print("uqcal: the job server's socket belongs to another user; running in this process", file=sys.stderr)
            return None
        request = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ), "umask": _umask()}).encode()
        try:
            socket.send_fds(sock, [struct.pack("!I", len(request)) + request], [0, 1, 2])
            buffer = bytearray()
            reply = _readline(sock, buffer)
        except OSError:
            reply = None
        if reply is None or "refused" in reply:
            reason = "it ended while starting" if reply is None else reply["refused"]
            print(f"uqcal: job server did not run this step ({reason}); running in this process", file=sys.stderr)
            return None
        pid = int(reply["pid"])
        previous = {signum: signal.signal(signum, lambda signum, _frame: _forward(pid, signum))
                    for signum in FORWARDED_SIGNALS}
        try:
            if on_started is not None:
                on_started(pid)
            try:
                reply = _readline(sock, buffer)
            except OSError:
                reply = None
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
    if reply is None:
        print(f"uqcal: the job server ended before job process {pid} did; the step failed", file=sys.stderr)
        return 1
    status = int(reply["exit"])
    return 128 - status if status < 0 else status


def stop_server(wait_seconds: float = 5.0) -> bool:
    """Stop this checkout's server, if one listens (the end of a run: its account is written when it exits, and
    it terminates the jobs it still runs); wait up to ``wait_seconds`` for it to exit. Whether one was stopped."""
    sock = _connect(socket_name())
    if sock is None:
        return False
    with sock:
        pid, uid = _peer(sock)
    if uid != os.getuid():
        return False
    _forward(pid, signal.SIGTERM)
    deadline = time.monotonic() + wait_seconds
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return True


def _forward(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# ------------------------------------------------------------------------------------------ server
class _Server:
    def __init__(self, argv: list[str]):
        self.started = time.perf_counter()
        self.started_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        self.cwd = os.getcwd()
        self.env = _compared_env(dict(os.environ))
        self.mode = _numerics_mode(argv)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(socket_name(self.cwd))  # OSError (EADDRINUSE): another server got there first
        self.listener.listen(64)
        self.jobs: dict[int, socket.socket] = {}   # forked job -> its step's connection
        self.served = 0
        self.refused = 0
        self.retired = ""                           # why no further request is taken
        self.stopping = False
        self.last_active = time.monotonic()
        self.files: dict[str, tuple[int, int]] = {}

    def preload(self) -> float:
        """Pin the numerics as the step would (uqcal.core.numerics.activate), then load ``PRELOAD``."""
        from uqcal.core.numerics import activate

        before = time.process_time()
        if self.mode is not None:
            activate(self.mode)
        gc.disable()
        try:
            import importlib

            for module in PRELOAD:
                try:
                    importlib.import_module(module)
                except ImportError:  # an install without that extra: its steps import what they have
                    continue
        finally:
            gc.freeze()
            gc.enable()
        self.files = _loaded_files()
        return time.process_time() - before

    # one request -----------------------------------------------------------------------------------
    def refusal(self, peer: socket.socket, request: dict) -> str | None:
        """Why ``request`` cannot run here exactly as in a process of its own (None: it can)."""
        if self.retired:
            return self.retired
        if _peer(peer)[1] != os.getuid():
            return "another user"
        if request.get("cwd") != self.cwd:
            return f"another directory ({request.get('cwd')})"
        env = _compared_env(request.get("env") or {})
        if env != self.env:
            differing = sorted(key for key in set(env) | set(self.env) if env.get(key) != self.env.get(key))
            return f"another environment ({', '.join(differing[:5])})"
        try:
            mode = _numerics_mode(request["argv"])
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - the step's own process reports it
            return f"its command line does not parse here ({type(exc).__name__})"
        if mode != self.mode:
            return f"numerics {mode}, the server's {self.mode}"
        changed = _changed(self.files)
        if changed:
            self.retired = f"{changed} changed since the server loaded it"
            return self.retired
        if threading.active_count() != 1 or _os_threads():
            self.retired = "the server runs threads, and a fork would copy their locks"
            return self.retired
        import torch

        if torch.cuda.is_initialized():
            self.retired = "CUDA is initialised in the server"
            return self.retired
        return None

    def accept(self) -> None:
        peer, _ = self.listener.accept()
        self.last_active = time.monotonic()
        try:
            request, fds = _receive(peer)
        except (OSError, ValueError) as exc:
            if str(exc):  # not `stop_server`, which connects only to learn the server's pid
                print(f"job server: unreadable request ({exc})", file=sys.stderr, flush=True)
            peer.close()
            return
        try:
            reason = self.refusal(peer, request)
            if reason is not None:
                self.refused += 1
                print(f"job server: refused {' '.join(request.get('argv', []))}: {reason}", file=sys.stderr,
                      flush=True)
                with contextlib.suppress(OSError):  # the step is gone already: nothing to tell it
                    _send(peer, {"refused": reason})
                peer.close()
                return
            sys.stdout.flush()
            sys.stderr.flush()
            # A signal the step forwards as soon as it has the pid must not meet the server's handlers in the child:
            # held until the child has put back the defaults.
            signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED_SIGNALS)
            pid = os.fork()
            if pid == 0:
                self._child(peer, request, fds)  # never returns
            signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED_SIGNALS)
        finally:
            for fd in fds:
                os.close(fd)
        self.served += 1
        self.jobs[pid] = peer
        try:
            _send(peer, {"pid": pid})
        except OSError:  # the step died before it learnt its job's pid: as a dropped connection (not the server's end)
            self.dropped(peer)

    def _child(self, peer: socket.socket, request: dict, fds: list[int]) -> None:
        """The forked job: the step's streams, directory and command line, then ``uqcal.cli.main`` as its process."""
        global FORKED, CLIENT_PID
        FORKED = True
        CLIENT_PID = _peer(peer)[0]
        status = 1
        try:
            for signum in FORWARDED_SIGNALS:
                signal.signal(signum, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED_SIGNALS)
            self.listener.close()
            peer.close()
            for connection in self.jobs.values():
                connection.close()
            for target, fd in zip((0, 1, 2), fds, strict=True):
                os.dup2(fd, target)
            os.chdir(request["cwd"])
            os.umask(int(request["umask"]))
            os.environ.pop(ENV_VARIABLE, None)  # the job's own children are not steps of this run
            import logging

            logging.root.handlers.clear()
            sys.argv = ["uqcal", *request["argv"]]
            from uqcal.cli import main

            status = main()
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # noqa: BLE001 - what an uncaught exception prints in the step's own process
            import traceback

            traceback.print_exc()
            status = 1
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:  # noqa: BLE001, S110 - a closed stream: the status still goes back
                    pass
            os._exit(status)

    # the loop --------------------------------------------------------------------------------------
    def reap(self) -> None:
        while self.jobs:
            try:
                pid, wait_status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            peer = self.jobs.pop(pid, None)
            self.last_active = time.monotonic()
            if peer is not None:
                with contextlib.suppress(OSError):  # the step is gone: its job was killed with it
                    _send(peer, {"exit": os.waitstatus_to_exitcode(wait_status)})
                peer.close()

    def dropped(self, peer: socket.socket) -> None:
        """A step's process is gone (killed outright): its job has no one to report to."""
        for pid, connection in list(self.jobs.items()):
            if connection is peer:
                _forward(pid, signal.SIGKILL)

    def serve(self) -> None:
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "stopping", True))
        signal.signal(signal.SIGINT, lambda *_: setattr(self, "stopping", True))
        selector = selectors.DefaultSelector()
        selector.register(self.listener, selectors.EVENT_READ)
        registered: set[socket.socket] = set()
        while True:
            self.reap()
            for peer in set(self.jobs.values()) - registered:
                selector.register(peer, selectors.EVENT_READ)
                registered.add(peer)
            for peer in registered - set(self.jobs.values()):
                selector.unregister(peer)
                registered.discard(peer)
            if self.stopping:
                for pid in self.jobs:
                    _forward(pid, signal.SIGTERM)
                self.listener.close()
                while self.jobs:
                    time.sleep(0.05)
                    self.reap()
                return
            idle = time.monotonic() - self.last_active
            if not self.jobs and (idle > IDLE_SECONDS or (self.retired and idle > 1.0)):
                return
            for key, _ in selector.select(timeout=0.5):
                if key.fileobj is self.listener:
                    self.accept()
                elif key.fileobj in registered:
                    try:
                        data = key.fileobj.recv(1, socket.MSG_PEEK)
                    except OSError:
                        data = b""
                    if not data:
                        self.dropped(key.fileobj)
                        selector.unregister(key.fileobj)
                        registered.discard(key.fileobj)

    def write_account(self, preload_cpu: float) -> None:
        """The server's own CPU (its imports and forks; each job's own is in the job's record)."""
        from uqcal.core.io import write_json

        usage = os.times()
        account = {"host": socket.gethostname(), "pid": os.getpid(), "started": self.started_at,
                   "ended": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                   "jobs_served": self.served, "requests_refused": self.refused, "retired": self.retired or None,
                   "preload": list(PRELOAD), "preload_cpu_seconds": round(preload_cpu, 3),
                   "resources": {"cpu_seconds": round(usage.user + usage.system, 3),
                                 "wall_seconds": round(time.perf_counter() - self.started, 3)}}
        try:
            write_json(Path(self.cwd) / STATE_DIR / f"{socket.gethostname()}-{os.getpid()}.json", account)
        except OSError:  # the checkout is gone (a test's temporary copy): nothing to account to
            pass


def _numerics_mode(argv: list[str]) -> str | None:
    """The numerics mode the step ``argv`` pins (uqcal.cli's rule), None for a command that is not a step."""
    from uqcal.cli import STEPS, build_parser, numerics_mode

    args = build_parser().parse_args(argv)
    return numerics_mode(args) if args.command in STEPS else None


def _loaded_files() -> dict[str, tuple[int, int]]:
    """Every loaded module's file -> (mtime_ns, size): what a forked job would run without reading it again."""
    found = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path:
            try:
                stat = os.stat(path)
            except OSError:
                continue
            found[path] = (stat.st_mtime_ns, stat.st_size)
    return found


def _changed(files: dict[str, tuple[int, int]]) -> str | None:
    for path, (mtime, size) in files.items():
        try:
            stat = os.stat(path)
        except OSError:
            return path
        if (stat.st_mtime_ns, stat.st_size) != (mtime, size):
            return path
    return None


# pyarrow's jemalloc runs a background thread; jemalloc takes its own locks around a fork (pthread_atfork) and the
# child starts its background threads afresh.
FORK_SAFE_THREADS = frozenset({"jemalloc_bg_thd"})


def _os_threads() -> int:
    """The process's OS threads other than the main one and those that survive a fork (``FORK_SAFE_THREADS``)."""
    task = Path("/proc/self/task")
    try:
        names = [(task / tid / "comm").read_text().strip() for tid in os.listdir(task) if int(tid) != os.getpid()]
    except OSError:
        return 0
    return sum(name not in FORK_SAFE_THREADS for name in names)


def _receive(peer: socket.socket) -> tuple[dict, list[int]]:
    data, fds, _, _ = socket.recv_fds(peer, 1 << 16, 3)
    if not data and not fds:
        raise ValueError("")  # connected and closed: no request
    if len(fds) != 3 or len(data) < 4:
        for fd in fds:
            os.close(fd)
        raise ValueError("expected a length, a request and three streams")
    (length,) = struct.unpack("!I", data[:4])
    payload = bytearray(data[4:])
    while len(payload) < length:
        chunk = peer.recv(length - len(payload))
        if not chunk:
            for fd in fds:
                os.close(fd)
            raise ValueError("the request ended early")
        payload += chunk
    return json.loads(payload), fds


def _send(peer: socket.socket, message: dict) -> None:
    peer.sendall(json.dumps(message).encode() + b"\n")


def main(argv: list[str] | None = None) -> int:
    """``python -m uqcal.cli.job_server <the step's command line>``: serve this checkout's steps until idle."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        server = _Server(argv)
    except OSError:  # EADDRINUSE: another step started a server first
        return 0
    print(f"job server {os.getpid()} on {socket.gethostname()}: started for {os.getcwd()} "
          f"(numerics {server.mode})", file=sys.stderr, flush=True)
    preload_cpu = server.preload()
    try:
        server.serve()
    finally:
        server.write_account(preload_cpu)
        print(f"job server {os.getpid()}: stopped after {server.served} jobs ({server.refused} refused"
              f"{'; ' + server.retired if server.retired else ''})", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    # Serve from the module under its own name, not as __main__: a forked job's flags (FORKED, CLIENT_PID) must be
    # where uqcal.pipeline.records and uqcal.pipeline.locks look for them (sys.modules["uqcal.cli.job_server"]).
    from uqcal.cli.job_server import main as serve

    sys.exit(serve())
