"""Published numbers (``config/reference/<family>.yaml``) and how our datasets relate to the paper's."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml


@dataclass
class Reference:
    family: str
    paper: str = ""
    source: str = ""
    spread: str = ""
    method_names: dict[str, str] = field(default_factory=dict)
    tables: dict[str, dict] = field(default_factory=dict)
    dataset_aliases: dict[str, list[str]] = field(default_factory=dict)
    path: Path | None = None

    def value(self, table_id: str, dataset: str, setting: str, method: str, metric: str) -> dict | None:
        table = self.tables.get(table_id)
        if table is None:
            return None
        for record in table["records"]:
            if (record["dataset"], str(record["setting"]), record["method"], record["metric"]) == (
                dataset,
                setting,
                method,
                metric,
            ):
                return record
        return None

    def paper_datasets(self, table_id: str | None = None) -> list[str]:
        tables = [self.tables[table_id]] if table_id in self.tables else list(self.tables.values())
        seen: dict[str, None] = {}
        for table in tables:
            for record in table["records"]:
                seen.setdefault(record["dataset"], None)
        for name in self.dataset_aliases:
            seen.setdefault(name, None)
        return list(seen)


def load_reference(reference_dir: Path, family: str) -> Reference:
    """Read ``<reference_dir>/<family>.yaml``; an absent file gives an empty reference."""
    path = Path(reference_dir) / f"{family}.yaml"
    if not path.exists():
        return Reference(family=family)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: the reference files are long
    data = yaml.load(path.read_text(), Loader=loader) or {}
    tables = {}
    for index, table in enumerate(data.get("tables") or []):
        for key in ("id", "table", "caption", "records"):
            if key not in table:
                raise ValueError(f"{path}: tables[{index}] lacks '{key}'")
        for j, record in enumerate(table["records"]):
            missing = {"dataset", "setting", "method", "metric", "mean"} - set(record)
            if missing:
                raise ValueError(f"{path}: tables[{index}].records[{j}] lacks {sorted(missing)}")
            record["setting"] = str(record["setting"])
        tables[table["id"]] = table
    return Reference(
        family=family,
        paper=data.get("paper", ""),
        source=data.get("source", ""),
        spread=data.get("spread", ""),
        method_names=data.get("method_names") or {},
        tables=tables,
        dataset_aliases=data.get("dataset_aliases") or {},
        path=path,
    )


def _mentions(text: str, name: str) -> bool:
    """Whole-word, case-insensitive mention of a paper dataset name, ignoring spaces around '->'."""
    squash = lambda s: re.sub(r"\s*->\s*", "->", s)  # noqa: E731
    pattern = r"(?<![A-Za-z0-9])" + re.escape(squash(name)) + r"(?![A-Za-z0-9])"
    return re.search(pattern, squash(text), flags=re.IGNORECASE) is not None


@dataclass(frozen=True)
class DatasetRelation:
    """How one of our datasets relates to the paper: ``same`` data, a ``stand_in``, or ``none``."""

    ours: str
    paper: str | None
    kind: str  # same | stand_in | none
    note: str = ""

    def label(self) -> str:
        if self.kind == "same":
            return f"{self.ours} (= paper's {self.paper})"
        if self.kind == "stand_in":
            return (
                f"{self.ours} (stand-in for paper's {self.paper})"
                if self.paper
                else f"{self.ours} (stand-in for {self.note})"
            )
        return self.ours


def relate_dataset(
    dataset: str, registry: dict, reference: Reference, candidates: list[str] | None = None
) -> DatasetRelation:
    """Match our dataset to a paper dataset via the reference's aliases, the registry's ``paper_dataset``
    (same data) or ``stands_in_for`` (different data). The first paper dataset mentioned wins."""
    names = candidates if candidates is not None else reference.paper_datasets()
    spec = registry.get(dataset) or {}
    for name in names:
        if dataset.lower() in [a.lower() for a in reference.dataset_aliases.get(name, [])]:
            return DatasetRelation(dataset, name, "same")
    same_text = str(spec.get("paper_dataset") or "")
    stand_text = str(spec.get("stands_in_for") or "")
    for text, kind in ((same_text, "same"), (stand_text, "stand_in")):
        if not text:
            continue
        hits = sorted(
            (m.start(), name)
            for name in names
            if (m := re.search(re.escape(name.split("->")[0]), text, re.I)) and _mentions(text, name)
        )
        if hits:
            return DatasetRelation(dataset, hits[0][1], kind, text)
    if stand_text:
        return DatasetRelation(dataset, None, "stand_in", stand_text)
    return DatasetRelation(dataset, None, "none", same_text)
