"""Every ```python block of the documentation site (docs/, mkdocs.yml) runs, as a reader would paste it.

Each block runs on its own (a fresh namespace, a temporary working directory), on in-memory data and the CPU;
`make docs` checks that the site builds. Blocks in other fences (```bash, ```yaml, ...) are not run.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
import torch
import yaml

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
SECONDS_PER_EXAMPLE = 60  # each takes seconds on a 2-core CPU; a loaded machine may take a few times longer


def _nav_pages(nav) -> list[str]:
    pages = []
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        pages += _nav_pages(value) if isinstance(value, list) else [value]
    return pages


def _examples() -> list[tuple[str, int, str]]:
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        text = page.read_text()
        for match in FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 2
            found.append((page.relative_to(REPO).as_posix(), line, match.group(1)))
    return found


EXAMPLES = _examples()


def test_every_page_is_on_the_site_and_every_api_page_has_an_example():
    nav = _nav_pages(yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"])
    pages = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    assert sorted(nav) == pages  # no page (and so no example) outside the site
    with_examples = {path for path, _, _ in EXAMPLES}
    for page in ("metrics", "calibration", "gp", *(f"methods/{f}" for f in ("metareg", "rio", "qr", "fewshot", "bo"))):
        assert f"docs/api/{page}.md" in with_examples, page


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
