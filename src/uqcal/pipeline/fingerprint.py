"""A run's non-timing numbers, as a fingerprint to compare across machines (`make numerics-check`; issue 48).

The fingerprint of a finished run is every family's results/<family>/runs.parquet without its timings
(`uqcal.methods.api.is_timing_key`): {family: {"dataset/setting/method/seed/metric": value}}, each value at
full precision (``float.hex``, so that the JSON holds the exact double). Under ``numerics: portable`` two x86-64-v3
CPUs give the same doubles, so the check is exact (``--rtol 0``) unless asked otherwise.

    python -m uqcal.pipeline.fingerprint write results tests/fixtures/numerics/smoke-fingerprint.json
    python -m uqcal.pipeline.fingerprint check results tests/fixtures/numerics/smoke-fingerprint.json
    python -m uqcal.pipeline.fingerprint smoke tests/fixtures/numerics/smoke-fingerprint.json

``smoke`` runs config/smoke.yaml in a throwaway copy of the repository's source (the workspace's own results/
stay as they are) and checks it. The committed fingerprint is that of the code it was written from: a change
that moves any number (a method's fix) rewrites it (``smoke --write``), in the same commit.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FINGERPRINT_VERSION = 1


def fingerprint(results_dir: Path) -> dict:
    """{family: {run/metric: value (float.hex; "nan")}} of every results/<family>/runs.parquet, timings left out."""
    import pandas as pd

    from uqcal.methods.api import is_timing_key

    families = {}
    for path in sorted(Path(results_dir).glob("*/runs.parquet")):
        runs = pd.read_parquet(path)
        values = {}
        for row in runs.itertuples(index=False):
            if is_timing_key(row.metric):
                continue
            values[f"{row.dataset}/{row.setting}/{row.method}/seed{row.seed}/{row.metric}"] = float(row.value).hex()
        families[path.parent.name] = values
    if not families:
        raise FileNotFoundError(f"{results_dir}: no <family>/runs.parquet (not a finished run)")
    return families


def compare(found: dict, expected: dict, rtol: float = 0.0) -> list[str]:
    """The differences between two fingerprints, one line each (empty: the same numbers)."""
    problems = []
    for family in sorted(expected.keys() | found.keys()):
        want, got = expected.get(family), found.get(family)
        if want is None or got is None:
            problems.append(f"{family}: only in the {'run' if want is None else 'fingerprint'}")
            continue
        for key in sorted(want.keys() | got.keys()):
            if key not in want or key not in got:
                problems.append(f"{family} {key}: only in the {'run' if key not in want else 'fingerprint'}")
                continue
            a, b = float.fromhex(want[key]), float.fromhex(got[key])
            if a == b or (math.isnan(a) and math.isnan(b)) or abs(a - b) <= rtol * max(abs(a), abs(b)):
                continue
            problems.append(f"{family} {key}: {b!r} here, {a!r} in the fingerprint (relative difference "
                            f"{abs(a - b) / max(abs(a), abs(b), 1e-300):.1e})")
    return problems


def write(results_dir: Path, path: Path, note: str = "") -> None:
    from uqcal.core.io import write_json
    from uqcal.core.numerics import describe

    write_json(path, {"version": FINGERPRINT_VERSION, "made_on": describe(), "note": note,
                      "families": fingerprint(results_dir)})


def check(results_dir: Path, path: Path, rtol: float = 0.0) -> list[str]:
    expected = json.loads(Path(path).read_text())
    if expected.get("version") != FINGERPRINT_VERSION:
        raise ValueError(f"{path}: fingerprint version {expected.get('version')!r}, expected {FINGERPRINT_VERSION}")
    return compare(fingerprint(results_dir), expected["families"], rtol)


def run_smoke(repo: Path, workdir: Path, cores: int = 2, env: dict | None = None) -> Path:
    """Run config/smoke.yaml in a copy of ``repo``'s source (what git tracks, and untracked files it does not
    ignore) under ``workdir``; returns the copy (its results/ hold the run)."""
    names = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=repo,
                           capture_output=True, check=True).stdout.decode().split("\0")
    copy = workdir / "repo"
    for name in filter(None, names):
        source, target = repo / name, copy / name
        if name == "dvc.lock" or not os.path.lexists(source):
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            os.symlink(os.readlink(source), target)
        else:
            shutil.copy2(source, target)
    # a git repository of its own: the run's DVC commit needs one (a refused commit fails the run)
    git = ["git", "-c", "user.name=uqcal", "-c", "user.email=uqcal@localhost"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-q", "--no-verify", "-m", "numerics smoke copy"]):
        subprocess.run([*git, *command], cwd=copy, check=True, capture_output=True)
    snakemake = Path(sys.executable).with_name("snakemake")
    env = dict(os.environ if env is None else env)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    subprocess.run([str(snakemake), "--cores", str(cores), "--configfile", "config/smoke.yaml"], cwd=copy,
                   env=env, check=True)
    return copy


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m uqcal.pipeline.fingerprint", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("write", "check"):
        p = sub.add_parser(name)
        p.add_argument("results", type=Path, help="a finished run's results/ folder")
        p.add_argument("fingerprint", type=Path)
    smoke = sub.add_parser("smoke", help="run config/smoke.yaml in a throwaway copy and check (or --write) it")
    smoke.add_argument("fingerprint", type=Path)
    smoke.add_argument("--write", action="store_true", help="rewrite the fingerprint from this run")
    smoke.add_argument("--cores", type=int, default=2)
    smoke.add_argument("--keep", action="store_true", help="keep the copy (its path is printed)")
    for p in (sub.choices["check"], smoke):
        p.add_argument("--rtol", type=float, default=0.0, help="relative tolerance (default 0: exact)")
    args = parser.parse_args(argv)
    if args.command == "write":
        write(args.results, args.fingerprint)
        return 0
    if args.command == "check":
        return _verdict(check(args.results, args.fingerprint, args.rtol), args.fingerprint)
    workdir = Path(tempfile.mkdtemp(prefix="uqcal-numerics-"))
    try:
        copy = run_smoke(Path.cwd(), workdir, args.cores)
        if args.write:
            write(copy / "results", args.fingerprint, note="config/smoke.yaml under the default numerics")
            print(f"wrote {args.fingerprint}")
            return 0
        return _verdict(check(copy / "results", args.fingerprint, args.rtol), args.fingerprint)
    finally:
        if args.keep:
            print(f"kept the run in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def _verdict(problems: list[str], path: Path) -> int:
    if problems:
        print(f"numerics check FAILED: {len(problems)} numbers differ from {path}:", file=sys.stderr)
        print("\n".join(problems[:40]), file=sys.stderr)
        return 1
    print(f"numerics check passed: every family's non-timing results equal {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
