"""Provenance shown on every report page: config + hash, git state, package versions, device, per-rule
wall-clock from Snakemake ``benchmark:`` files and the dataset provenance records."""

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
    benchmarks: pd.DataFrame = field(default_factory=pd.DataFrame)  # rule, job, seconds, max_rss
    datasets: dict[str, dict] = field(default_factory=dict)


def file_sha256(path: str | Path) -> str:
    path = Path(path)
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "missing"


def git_state(repo: Path) -> tuple[str, bool | None]:
    """(commit, dirty) of the repository holding ``repo``; ('unknown', None) outside git."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True, timeout=20
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
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


# The last line every pipeline step logs (uqcal.cli._log_resources): the job's own account, which stays right
# when the job ran in the preload worker and Snakemake's benchmark only saw the thin client.
_RESOURCE_LINE = re.compile(r"uqcal \w+: ([0-9.]+) s wall, ([0-9.]+) s CPU, peak RSS ([0-9.]+) MB")


def _logged_resources(log_path: Path) -> tuple[float, float] | None:
    """(CPU seconds, peak RSS MB) from a job log's last resource line, if any."""
    try:
        text = log_path.read_text(errors="replace")
    except OSError:
        return None
    found = _RESOURCE_LINE.findall(text)
    if not found:
        return None
    _, cpu, rss = found[-1]
    return float(cpu), float(rss)


def _planned(rule: str, job: str, jobs: set[str] | None) -> bool:
    if jobs is None:
        return True
    name = f"{rule}/{job}"
    return name in jobs or any(name.startswith(j + "/") for j in jobs)


def read_benchmarks(logs_dir: Path, jobs: list[str] | None = None) -> pd.DataFrame:
    """Snakemake benchmark TSVs under ``<logs_dir>/bench/<rule>/...tsv`` (columns s, h:m:s, max_rss, ...);
    with ``jobs`` (``<rule>/<job>`` names, e.g. ``train/rio/concrete/holdout/rio``), only those jobs'.

    Wall seconds come from the benchmark; CPU seconds and peak memory from the job's own log line
    (``<logs_dir>/<rule>/....log``) when it has one, else from the benchmark.
    """
    wanted = set(jobs) if jobs is not None else None
    rows = []
    root = Path(logs_dir) / "bench"
    for path in sorted(root.rglob("*.tsv")) if root.is_dir() else []:
        try:
            frame = pd.read_csv(path, sep="\t")
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError):
            continue
        if "s" not in frame.columns or frame.empty:
            continue
        rel = path.relative_to(root)
        job = str(rel.with_suffix(""))[len(rel.parts[0]) + 1 :] or rel.stem
        if not _planned(rel.parts[0], job, wanted):
            continue
        cpu = float(pd.to_numeric(frame.get("cpu_time", pd.Series([float("nan")])), errors="coerce").mean())
        rss = float(pd.to_numeric(frame.get("max_rss", pd.Series([float("nan")])), errors="coerce").mean())
        logged = _logged_resources(Path(logs_dir) / rel.with_suffix(".log"))
        if logged is not None:
            cpu, rss = logged
        rows.append(
            {
                "rule": rel.parts[0],
                "job": job,
                "seconds": float(frame["s"].mean()),
                "cpu_seconds": cpu,
                "max_rss_mb": rss,
            }
        )
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


def collect(config_path: str | Path, repo: Path, logs_dir: Path, data_dir: Path,
            datasets: list[str] | None = None, jobs: list[str] | None = None) -> Provenance:
    """Provenance of one run: with ``datasets`` / ``jobs`` (the config's), only their records and timings,
    not those of whatever else was run in the same folders."""
    commit, dirty = git_state(Path(repo))
    return Provenance(
        config_path=str(config_path),
        config_sha256=file_sha256(config_path),
        git_commit=commit,
        git_dirty=dirty,
        packages=package_versions(),
        device=device_description(),
        python=platform.python_version(),
        benchmarks=read_benchmarks(logs_dir, jobs),
        datasets=read_dataset_records(data_dir, datasets),
    )
