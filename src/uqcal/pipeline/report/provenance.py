"""Provenance shown on every report page: config + hash, git state, package versions, the environment lock
(hash, and whether the installed versions are the locked ones), the report machine's device and, per family,
the device every run trained on (its train_stats.json), per-rule wall-clock, CPU and memory from the job records
(uqcal.pipeline.records) and the dataset provenance records."""

from __future__ import annotations

import hashlib
import json
import platform
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import pandas as pd

from uqcal.pipeline.layout import RunLayout
from uqcal.pipeline.report.results import RunFiles

PACKAGES = (
    "uqcal",
    "torch",
    "gpytorch",
    "botorch",
    "numpy",
    "scipy",
    "pandas",
    "scikit-learn",
    "matplotlib",
    "seaborn",
    "snakemake",
    "dvc",
    "pyarrow",
)


@dataclass
class Provenance:
    config_path: str
    config_sha256: str
    git_commit: str
    git_dirty: bool | None
    packages: dict[str, str]
    device: str
    python: str
    benchmarks: pd.DataFrame = field(default_factory=pd.DataFrame)  # rule, job, seconds, cpu_seconds, max_rss_mb
    datasets: dict[str, dict] = field(default_factory=dict)
    # The environment lock (`make lock`): sha256 of each lock file, and every installed version that differs
    # from it ("name installed (lock: version)"; empty: the environment is exactly the lock).
    lock: dict[str, str] = field(default_factory=dict)
    lock_mismatches: list[str] = field(default_factory=list)
    # Plug-in families (families.<name>.package): {name: {"package", "folder", "sha256" of its files,
    # "untracked": files git does not track}} (`plugin_state`); an untracked file makes the run dirty.
    plugins: dict[str, dict] = field(default_factory=dict)


def file_sha256(path: str | Path) -> str:
    path = Path(path)
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "missing"


# Files every run rewrites to describe itself (uqcal dvc-sync): a run of another config than the committed
# one changes them, but no code or config, so they do not make the code that produced a report "dirty".
RUN_RECORDS = ("dvc.yaml", "dvc.lock")


def git_state(repo: Path) -> tuple[str, bool | None]:
    """(commit, dirty) of the repository holding ``repo``; ('unknown', None) outside git.

    Dirty: a tracked file differs from the commit, the run's own records (RUN_RECORDS) apart.
    """
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True, timeout=20
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
             *(f":(exclude,top){name}" for name in RUN_RECORDS)],
            cwd=repo,
            capture_output=True,
            text=True,
            check=True,
            timeout=20,
        ).stdout
        return commit, bool(status.strip())
    except (OSError, subprocess.SubprocessError):
        return "unknown", None


def package_versions(names=PACKAGES) -> dict[str, str]:
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            module = sys.modules.get(name.replace("-", "_"))
            version = getattr(module, "__version__", None)
            versions[name] = f"{version} (source tree)" if version else "not installed"
    return versions


# The lock `make lock` writes and `make venv` installs: everything but torch, and torch's own build on its own
# line (requirements-torch-<build>.lock, e.g. cpu), so that another build can be swapped in.
LOCK_FILE = "requirements.lock"
TORCH_LOCK_GLOB = "requirements-torch-*.lock"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", re.MULTILINE)


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_pins(path: str | Path) -> dict[str, str]:
    """``{normalised name: version}`` of a pip requirements lock (``name==version`` lines)."""
    return {_normalise(name): version for name, version in _PIN.findall(Path(path).read_text())}


def installed_versions() -> dict[str, str]:
    return {_normalise(dist.metadata["Name"]): dist.version for dist in metadata.distributions()
            if dist.metadata["Name"]}


def lock_state(repo: Path, installed: dict[str, str] | None = None) -> tuple[dict[str, str], list[str]]:
    """(sha256 of each lock file in ``repo``, the installed versions that differ from the lock).

    Every pin of requirements.lock is compared; of the torch locks, the one whose torch pin is installed (a
    torch that no torch lock pins is a difference). No requirements.lock: ({LOCK_FILE: "missing"}, []).
    """
    repo = Path(repo)
    main = repo / LOCK_FILE
    hashes = {LOCK_FILE: file_sha256(main)}
    if not main.exists():
        return hashes, []
    installed = installed_versions() if installed is None else installed
    pins = lock_pins(main)
    torch_locks = sorted(repo.glob(TORCH_LOCK_GLOB))
    hashes.update({path.name: file_sha256(path) for path in torch_locks})
    torch_pins = [lock_pins(path) for path in torch_locks]
    matching = [p for p in torch_pins if p.get("torch") == installed.get("torch")]
    if matching:
        pins = {**matching[0], **pins}
    elif torch_pins:
        locked = " or ".join(sorted({p.get("torch", "?") for p in torch_pins}))
        pins = {**pins, "torch": locked}
    differ = [f"{name} {installed.get(name, 'not installed')} (lock: {version})"
              for name, version in sorted(pins.items()) if installed.get(name) != version]
    return hashes, differ


def cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def device_description() -> str:
    """GPU name when CUDA is available, else the CPU model (without importing torch just for this)."""
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        if torch.cuda.is_available():
            return f"GPU: {torch.cuda.get_device_name(0)} (CPU: {cpu_model()})"
    elif shutil.which("nvidia-smi"):
        try:
            names = (
                subprocess.run(
                    ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                    capture_output=True,
                    text=True,
                    timeout=20,
                )
                .stdout.strip()
                .splitlines()
            )
        except (OSError, subprocess.SubprocessError):
            names = []
        if names:
            return f"GPU: {names[0]} (CPU: {cpu_model()})"
    return f"CPU: {cpu_model()}"


NOT_RECORDED = "not recorded"
DEVICE_COLUMNS = ["device", "device_name", "method", "runs"]


def read_run_devices(files: RunFiles) -> pd.DataFrame:
    """(device, device_name, method, runs): where each method's planned runs trained, counted per device.

    Read from each run's ``train_stats.json`` (``device`` and ``device_name``, written by
    ``RunContext.save_outputs``), not from the machine building the report: a cluster's runs train on GPU
    nodes and are reported from a login node. A run without the fields counts as "not recorded".
    """
    counts: dict[tuple[str, str, str], int] = {}
    for dataset, setting, method, seed in files.runs():
        if not (files.run_dir(dataset, setting, method, seed) / RunLayout.TRAIN_STATS).exists():
            continue
        stats = files.train_stats(dataset, setting, method, seed)
        key = (str(stats.get("device") or NOT_RECORDED), str(stats.get("device_name") or ""), method)
        counts[key] = counts.get(key, 0) + 1
    rows = [(*key, n) for key, n in sorted(counts.items())]
    return pd.DataFrame(rows, columns=DEVICE_COLUMNS)


def _planned(rule: str, job: str, jobs: set[str] | None) -> bool:
    if jobs is None:
        return True
    name = f"{rule}/{job}"
    return name in jobs or any(name.startswith(j + "/") for j in jobs)


def read_job_resources(records_dir: Path, jobs: list[str] | None = None) -> pd.DataFrame:
    """Wall time, CPU time and peak memory of every pipeline job, as each job measured itself; with
    ``jobs`` (``<rule>/<job>`` names, e.g. ``train/<family>/<dataset>/<setting>/<method>``), only those jobs'.

    Read from the job records (``<records_dir>/<rule>/<job>.json``, written by uqcal.pipeline.records), which are
    outputs of their jobs and DVC stages, so a report rebuilt after `dvc pull` still has every job's row.
    """
    wanted = set(jobs) if jobs is not None else None
    rows = []
    root = Path(records_dir)
    for path in sorted(root.rglob("*.json")) if root.is_dir() else []:
        try:
            used = json.loads(path.read_text())["resources"]
            row = {"seconds": float(used["wall_seconds"]), "cpu_seconds": float(used["cpu_seconds"]),
                   "max_rss_mb": float(used["max_rss_mb"])}
        except (OSError, ValueError, KeyError, TypeError):
            continue
        rel = path.relative_to(root).with_suffix("")
        job = "/".join(rel.parts[1:]) or rel.parts[0]
        if not _planned(rel.parts[0], job, wanted):
            continue
        rows.append({"rule": rel.parts[0], "job": job, **row})
    return pd.DataFrame(rows, columns=["rule", "job", "seconds", "cpu_seconds", "max_rss_mb"])


def read_dataset_records(data_dir: Path, names: list[str] | None = None) -> dict[str, dict]:
    """``data/raw/<name>.json`` provenance records (all, or only ``names``)."""
    raw = Path(data_dir) / "raw"
    records = {}
    for path in sorted(raw.glob("*.json")) if raw.is_dir() else []:
        if names is not None and path.stem not in names:
            continue
        try:
            records[path.stem] = json.loads(path.read_text())
        except json.JSONDecodeError:
            records[path.stem] = {"error": f"{path.name} is not valid JSON"}
    return records


def plugin_state(repo: Path) -> dict[str, dict]:
    """Every plug-in family registered in this process: its package, its folder, the sha256 of its files (path and
    content, sorted) and those of its files that git does not track (all of them outside a git repository)."""
    from uqcal.methods.api import get_family, plugin_families

    found = {}
    for name, package in sorted(plugin_families().items()):
        folder = get_family(name).folder().resolve()
        files = sorted(p for p in folder.rglob("*")
                       if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")
        digest = hashlib.sha256()
        for path in files:
            digest.update(f"{path.relative_to(folder).as_posix()}\0{file_sha256(path)}\n".encode())
        shown = folder.relative_to(repo.resolve()).as_posix() if folder.is_relative_to(repo.resolve()) else str(folder)
        try:
            listed = subprocess.run(["git", "ls-files", "--others", "--", str(folder)], cwd=repo, capture_output=True,
                                    text=True, check=True, timeout=20).stdout.split()
            untracked = sorted(p for p in listed if "__pycache__" not in p and not p.endswith(".pyc"))
        except (OSError, subprocess.SubprocessError):
            untracked = [f"{shown}/{p.relative_to(folder).as_posix()}" for p in files]
        found[name] = {"package": package, "folder": shown, "sha256": digest.hexdigest(), "untracked": untracked}
    return found


def collect(config_path: str | Path, repo: Path, records_dir: Path, data_dir: Path,
            datasets: list[str] | None = None, jobs: list[str] | None = None) -> Provenance:
    """Provenance of one run: with ``datasets`` / ``jobs`` (the config's), only their records and timings,
    not those of whatever else was run in the same folders."""
    from uqcal.pipeline.config.source import config_hash

    commit, dirty = git_state(Path(repo))
    plugins = plugin_state(Path(repo))
    if any(p["untracked"] for p in plugins.values()):
        dirty = True  # the code that produced the report is not all in the commit
    lock, lock_mismatches = lock_state(Path(repo))
    return Provenance(
        config_path=str(config_path),
        # the config and the files it extends (a file alone: its own sha256)
        config_sha256=config_hash(config_path) if Path(config_path).is_file() else "missing",
        git_commit=commit,
        git_dirty=dirty,
        packages=package_versions(),
        device=device_description(),
        python=platform.python_version(),
        benchmarks=read_job_resources(records_dir, jobs),
        datasets=read_dataset_records(data_dir, datasets),
        lock=lock,
        lock_mismatches=lock_mismatches,
        plugins=plugins,
    )
