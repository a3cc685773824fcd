"""The layers below the methods know no family by name: what a family is lives in its package (issue 38)."""

import re
from pathlib import Path

from uqcal.methods.api import builtin_families

SRC = Path(__file__).resolve().parents[2] / "src" / "uqcal"
GENERIC = ("core", "data", "metrics", "pipeline")


def test_no_family_name_appears_in_the_generic_layers():
    names = builtin_families()
    assert {"rio", "qr", "metareg", "fewshot", "bo", "arena"} <= set(names)  # the check checks something
    # A family name as a word of its own: `rio`, "families.rio", `bo` family; not inside an identifier
    # (fewshot_classification is a dataset kind, ce_qr a metric's name).
    pattern = re.compile(rf"(?<![\w-])({'|'.join(map(re.escape, names))})(?![\w-])")
    hits = [f"{path.relative_to(SRC.parent)}:{number}: {line.strip()}"
            for layer in GENERIC for path in sorted((SRC / layer).rglob("*")) if path.suffix in (".py", ".yaml")
            for number, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert hits == []
