"""A throwaway single-node SLURM cluster on localhost (munged + slurmctld + slurmd), for tests.

Everything lives in one private temporary directory: the munge key and socket, `slurm.conf`, state, spool,
pid and log files. Daemons run in the foreground as children of the test process, on free ports, so two
clusters on one machine do not collide and teardown can stop exactly the processes it started.
Clients (`sbatch`, `squeue`, `sinfo`, `scontrol`, `srun`) find the cluster through `cluster.env`: `SLURM_CONF`,
and a PATH that starts with shims setting SLURM_CONF again. The shims are needed because
snakemake-executor-plugin-slurm-jobstep (0.6) strips every SLURM_* variable, SLURM_CONF included, before the
`srun` it runs inside each job; on a real cluster srun finds /etc/slurm/slurm.conf instead.

Accounting: there is no slurmdbd, so `sacct` cannot work ("accounting storage is disabled"); job status
therefore comes from `squeue --states=all`, which keeps finished jobs for `MinJobAge` seconds.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

SBIN_DIRS = ("/usr/sbin", "/usr/local/sbin", "/sbin")
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "sinfo", "scontrol", "srun", "scancel")
MEMORY_MARGIN_MB = 1024  # leave room for the OS: slurmd refuses RealMemory above what it sees
MIN_JOB_AGE_S = 600  # finished jobs stay visible to `squeue` this long (status checks need them)
SECOND_PARTITION = "training"  # not the default: a job lands in it only when asked to


class SlurmUnavailable(RuntimeError):
    """SLURM could not be started here; the message says which part and shows its log."""


@dataclass
class SlurmCluster:
    root: Path
    conf: Path
    partition: str
    logs: dict[str, Path]
    env: dict[str, str] = field(default_factory=dict)

    def environ(self, base: dict[str, str]) -> dict[str, str]:
        return cluster_environment(base, self.conf)

    def client(self, *args: str, timeout: int = 30) -> subprocess.CompletedProcess:
        return subprocess.run(list(args), env=self.env, capture_output=True, text=True, timeout=timeout)

    def log_tails(self, lines: int = 30) -> str:
        parts = []
        for name, path in self.logs.items():
            text = path.read_text(errors="replace").splitlines()[-lines:] if path.exists() else ["(no log written)"]
            parts.append(f"--- {name} log ({path}) ---\n" + "\n".join(text))
        return "\n".join(parts)


def cluster_environment(base: dict[str, str], conf: Path) -> dict[str, str]:
    """`base` pointed at this cluster, without a caller's SBATCH_*/SLURM_* defaults leaking into our jobs."""
    env = {k: v for k, v in base.items() if not k.startswith(("SBATCH_", "SALLOC_", "SRUN_", "SLURM_"))}
    shims = conf.parent / "bin"
    return {**env, "SLURM_CONF": str(conf), "PATH": f"{shims}{os.pathsep}{env.get('PATH', '')}"}


def write_client_shims(conf: Path) -> None:
    shims = conf.parent / "bin"
    shims.mkdir()
    for name in CLIENTS:
        shim = shims / name
        shim.write_text(f'#!/bin/sh\nSLURM_CONF="{conf}" exec "{find_binary(name)}" "$@"\n')
        shim.chmod(0o755)


def find_binary(name: str) -> str | None:
    """Daemons live in sbin, which is not on every user's PATH."""
    return shutil.which(name) or shutil.which(name, path=os.pathsep.join(SBIN_DIRS))


def missing_binaries() -> list[str]:
    return [name for name in (*DAEMONS, *CLIENTS) if find_binary(name) is None]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _real_memory_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return max(512, int(line.split()[1]) // 1024 - MEMORY_MARGIN_MB)
    raise SlurmUnavailable("MemTotal missing from /proc/meminfo")


def write_slurm_conf(root: Path, munge_socket: Path, user: str, partition: str) -> tuple[Path, dict[str, Path]]:
    logs = {"slurmctld": root / "slurmctld.log", "slurmd": root / "slurmd.log"}
    for sub in ("state", "spool"):
        (root / sub).mkdir()
    conf = root / "slurm.conf"
    conf.write_text(f"""\
ClusterName=uqcaltest
SlurmctldHost=localhost
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser={user}
SlurmdUser={user}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
StateSaveLocation={root / 'state'}
SlurmdSpoolDir={root / 'spool'}
SlurmctldPidFile={root / 'slurmctld.pid'}
SlurmdPidFile={root / 'slurmd.pid'}
SlurmctldLogFile={logs['slurmctld']}
SlurmdLogFile={logs['slurmd']}
SlurmctldDebug=info
SlurmdDebug=info
# Containers have no usable cgroup hierarchy: track processes through /proc, bind no tasks.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
# Cores are consumable, memory is not: a small CI runner still runs one job per core.
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MinJobAge={MIN_JOB_AGE_S}
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
NodeName=localhost NodeAddr=127.0.0.1 CPUs={os.cpu_count() or 1} RealMemory={_real_memory_mb()} State=UNKNOWN
PartitionName={partition} Nodes=localhost Default=YES MaxTime=INFINITE State=UP
PartitionName={SECOND_PARTITION} Nodes=localhost Default=NO MaxTime=INFINITE State=UP
""")
    return conf, logs


def _start(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    # Own process group, so teardown signals the daemon and whatever it forked, and nothing else.
    with open(log.with_suffix(".out"), "w") as out:
        return subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)
    except ProcessLookupError:
        pass


def _wait_for(what: str, ready, procs: dict[str, subprocess.Popen], cluster: SlurmCluster, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name, proc in procs.items():
            if proc.poll() is not None:
                raise SlurmUnavailable(
                    f"{name} exited with status {proc.returncode} while waiting for {what}\n{cluster.log_tails()}")
        if ready():
            return
        time.sleep(0.5)
    raise SlurmUnavailable(f"timed out after {timeout:.0f}s waiting for {what}\n{cluster.log_tails()}")


@contextmanager
def slurm_cluster(start_timeout: float = 60, partition: str = "debug") -> Iterator[SlurmCluster]:
    """Start munged, slurmctld and slurmd; yield once the node is idle; always stop them afterwards.

    Raises SlurmUnavailable (binaries missing, a daemon dying, the node never becoming idle) with the
    relevant log tails in the message.
    """
    missing = missing_binaries()
    if missing:
        raise SlurmUnavailable(f"SLURM/munge binaries not found: {', '.join(missing)} "
                               "(Debian: apt-get install slurm-wlm munge)")
    # A short path: the munge socket path must fit in a sockaddr_un (108 bytes).
    root = Path(tempfile.mkdtemp(prefix="uqcal-slurm-", dir="/tmp"))
    procs: dict[str, subprocess.Popen] = {}
    try:
        munge_socket = root / "munge.sock"
        user = subprocess.run(["id", "-un"], capture_output=True, text=True, check=True).stdout.strip()
        conf, logs = write_slurm_conf(root, munge_socket, user, partition)
        logs = {"munged": root / "munged.log", **logs}
        write_client_shims(conf)
        env = cluster_environment(os.environ, conf)
        cluster = SlurmCluster(root=root, conf=conf, partition=partition, logs=logs, env=env)

        key = root / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        procs["munged"] = _start([find_binary("munged"), "--foreground", "--force", f"--key-file={key}",
                                  f"--socket={munge_socket}", f"--pid-file={root / 'munged.pid'}",
                                  f"--log-file={logs['munged']}", f"--seed-file={root / 'munged.seed'}"],
                                 env, logs["munged"])
        _wait_for("the munge socket", munge_socket.exists, procs, cluster, start_timeout)

        procs["slurmctld"] = _start([find_binary("slurmctld"), "-D", "-i", "-f", str(conf)], env, logs["slurmctld"])
        procs["slurmd"] = _start([find_binary("slurmd"), "-D", "-N", "localhost", "-f", str(conf)], env, logs["slurmd"])

        def node_idle() -> bool:
            proc = cluster.client(find_binary("sinfo"), "-h", "-N", "-o", "%N %T")
            return proc.returncode == 0 and "localhost idle" in proc.stdout

        _wait_for("sinfo to show node localhost idle", node_idle, procs, cluster, start_timeout)
        yield cluster
    finally:
        # Reverse order: the node first, then the controller, then authentication.
        for name in reversed(list(procs)):
            _stop(procs[name])
        shutil.rmtree(root, ignore_errors=True)
