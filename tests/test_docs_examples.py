"""Every example of the documentation (docs/, mkdocs.yml, README.md) runs, as a reader would paste it.

- Each ```python block runs on its own (a fresh namespace, a temporary working directory), on in-memory data
  and the CPU; `make docs` checks that the site builds.
- The quickstart's library part (its ```python blocks above "## The pipeline") also runs in a process where
  torch, matplotlib and the pipeline's packages cannot be imported: it must work on the base install.
- Each command of a ```bash block is either run (the quick `uqcal` commands, from the repository) or listed in
  NOT_RUN with the reason; a command in neither fails the test, so that no example is skipped silently.
- Every repository path a page names exists.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from tests.conftest import tool_env

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
PAGES = [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]
FENCE = re.compile(r"^```(python|bash)[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
SECONDS_PER_EXAMPLE = 60  # each takes seconds on a 2-core CPU; a loaded machine may take a few times longer
QUICKSTART = DOCS / "quickstart.md"
PIPELINE_HEADING = "\n## The pipeline\n"

# Commands of ```bash blocks that the tests do not run, each with the reason (matched at the start of a
# command). The pipeline's own commands are run by the end-to-end tests on the smoke config.
NOT_RUN = {
    "pip install": "installs packages (the light-install check of .ci/run installs the base package)",
    "make venv": "builds .venv from the lock (minutes); .ci/run does",
    "make smoke": "runs the smoke pipeline; tests/e2e/test_pipeline.py runs it",
    "make reproduce": "the default run (about 22 minutes)",
    "CORES=8 make reproduce": "the default run (about 22 minutes)",
    "make test": "the whole suite; this test is part of it",
    "make docs": "builds the site; .ci/run does",
    "make lock": "re-resolves the lock against the package index",
    "make lint": "ruff and lint-imports; .ci/run does",
    "make arena": "the arena's run",
    "make numerics-check": "runs the smoke pipeline in a copy; tests/e2e/test_numerics.py checks its pins on emulated CPUs",
    "make pull": "fetches results from a DVC remote",
    ".ci/run": "CI itself",
    ".venv/bin/pytest": "a part of the suite",
    ".venv/bin/ruff": "the linter; .ci/run runs it",
    ".venv/bin/python -m pip": "installs torch from the package index",
    "python benchmarks/": "a benchmark (minutes)",
    "bash benchmarks/": "needs a GPU",
    "UQCAL_TEST_DEVICE=cuda": "needs a GPU",
    "source .venv/bin/activate": "changes the shell, not a command to test",
    "snakemake": "runs the pipeline; tests/e2e runs it on the smoke config (and tests/e2e/test_slurm.py the SLURM one)",
    "dvc ": "DVC on a finished run; tests/e2e/test_reruns.py and test_dvc_commit.py run these",
    "uqcal materialise": "fetches or builds a dataset (the example's is not in the registry)",
    "uqcal cost": "its optional flags in brackets; tests/pipeline/test_cost.py runs the command on shipped configs",
}
# Commands the tests run, from the repository root, with uqcal on the path: quick and read-only.
RUN = ("uqcal --help", "uqcal --version", "uqcal validate-config", "uqcal runs")

# Paths a page names that are not in the repository on purpose, each with the reason.
NOT_IN_REPO = {
    "config/datasets.lock.json": "written on a dataset's first download",
    "config/x.yaml": "an example file name in an error message",
    "config/y.yaml": "an example file name in an error message",
    "config/z.yaml": "an example file name in an error message",
    "config/base.yml": "an example of a misspelt file name",
}
PATH = re.compile(r"(?<![\w/.<-])((?:src|tests|config|docs|benchmarks|workflow|\.ci|profiles)/[A-Za-z0-9_./-]*[A-Za-z0-9_])")


def _nav_pages(nav) -> list[str]:
    pages = []
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        pages += _nav_pages(value) if isinstance(value, list) else [value]
    return pages


def _blocks(language: str) -> list[tuple[str, int, str]]:
    found = []
    for page in PAGES:
        text = page.read_text()
        for match in FENCE.finditer(text):
            if match.group(1) == language:
                line = text.count("\n", 0, match.start()) + 2
                found.append((page.relative_to(REPO).as_posix(), line, match.group(2)))
    return found


EXAMPLES = _blocks("python")


def _commands(source: str) -> list[str]:
    """The commands of a bash block: comments dropped, continued lines joined."""
    commands, current = [], ""
    for raw in source.splitlines():
        line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not line.strip():
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        commands.append((current + line).strip())
        current = ""
    return commands


SHELL = [(path, line, command) for path, line, source in _blocks("bash") for command in _commands(source)]


def test_every_page_is_on_the_site_and_every_api_page_has_an_example():
    nav = _nav_pages(yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"])
    pages = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    assert sorted(nav) == pages  # no page (and so no example) outside the site
    with_examples = {path for path, _, _ in EXAMPLES}
    for page in ("metrics", "calibration", "gp", *(f"methods/{f}" for f in ("metareg", "rio", "qr", "fewshot", "bo"))):
        assert f"docs/api/{page}.md" in with_examples, page
    assert {"docs/quickstart.md", "docs/library.md"} <= with_examples


@pytest.mark.parametrize("path,line,source", EXAMPLES, ids=[f"{p}:{n}" for p, n, _ in EXAMPLES])
def test_docs_example_runs(path, line, source, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the test suite and the pipeline's jobs run torch (torch_threads: 1)
    started = time.perf_counter()
    try:
        exec(compile(source, f"{path}:{line}", "exec"), {"__name__": "__docs_example__"})
    finally:
        torch.set_num_threads(threads)
    seconds = time.perf_counter() - started
    assert seconds < SECONDS_PER_EXAMPLE, f"{path}:{line} took {seconds:.0f} s; an example must run in seconds"


# Importing any of these fails in the light-install check below. A finder that refuses them, not a None in
# sys.modules: scipy looks torch up in sys.modules and would take a None for the module.
NOT_IN_BASE_INSTALL = ("torch", "gpytorch", "botorch", "matplotlib", "seaborn", "snakemake", "dvc")
REFUSE_IMPORTS = f"""
import importlib.abc, sys
class _NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {NOT_IN_BASE_INSTALL!r}:
            raise ModuleNotFoundError(f"{{name}} is not part of the base install", name=name)
sys.meta_path.insert(0, _NotInstalled())
"""


def test_the_quickstart_library_part_runs_without_torch_or_matplotlib(tmp_path):
    text = QUICKSTART.read_text()
    assert PIPELINE_HEADING in text, "docs/quickstart.md must have the heading '## The pipeline'"
    library_part = text.split(PIPELINE_HEADING, 1)[0]
    blocks = [m.group(2) for m in FENCE.finditer(library_part) if m.group(1) == "python"]
    assert blocks, "the quickstart's library part has no ```python block"
    program = REFUSE_IMPORTS + "\n".join(blocks)
    proc = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, env=tool_env(), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip(), "the quickstart prints its metrics"


@pytest.mark.parametrize("path,line,command", SHELL, ids=[f"{p}:{n}:{c[:40]}" for p, n, c in SHELL])
def test_docs_shell_command(path, line, command):
    if command.startswith(RUN):
        proc = subprocess.run([sys.executable, "-m", "uqcal", *shlex.split(command)[1:]], cwd=REPO,
                              env=tool_env(), capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, f"{path}:{line}: `{command}` failed:\n{proc.stderr}"
        return
    reason = next((why for start, why in NOT_RUN.items() if command.startswith(start)), None)
    assert reason, f"{path}:{line}: `{command}`: run it here (RUN) or say in NOT_RUN why not"
    pytest.skip(f"not run: {reason}")


def test_every_path_a_page_names_exists():
    missing = []
    for page in [*PAGES, REPO / "mkdocs.yml"]:
        for number, text in enumerate(page.read_text().splitlines(), 1):
            for match in PATH.finditer(text):
                path, end = match.group(1), match.end()
                if end < len(text) and text[end] in "<*{$[":  # a pattern: docs/<family>.md, tests/*/...
                    continue
                if path not in NOT_IN_REPO and not (REPO / path).exists():
                    missing.append(f"{page.relative_to(REPO)}:{number}: {path}")
    assert not missing, missing
