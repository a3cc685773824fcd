"""Published numbers (``paper_numbers.yaml`` of each family's package) and how our datasets relate to the paper's."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml
from scipy import stats

from uqcal.metrics.replication import (
    SPREAD_KINDS,
    difference_standard_error,
    paper_standard_error,
    welch_satterthwaite_df,
)


@dataclass(frozen=True)
class PaperNumber:
    """A paper's mean (or difference of two means) with its printed ±, its standard error and the runs behind it."""

    mean: float
    std: float | None
    se: float | None
    n: int | None
    table: str
    record: dict | None = None
    cells: tuple | None = None  # a difference: the two cells it is made of
    difference_df: float | None = None  # a difference of two means: the Welch-Satterthwaite df of their se's
    se_basis: str = ""  # how the se was formed (a difference: the sqrt formula or the paper's test's bound)

    @property
    def df(self) -> int | None:
        """The paper's degrees of freedom: n - 1 for one mean; for a difference of two printed means the
        Welch-Satterthwaite df of their standard errors (2 (n - 1) at equal n and spreads), or n - 1 where the se
        is the bound from the paper's paired test. Used by the prediction interval's and d33's t quantiles."""
        if self.difference_df is not None:
            return self.difference_df
        return None if self.n is None else self.n - 1


@dataclass
class Reference:
    family: str
    paper: str = ""
    source: str = ""
    spread: str = ""
    method_names: dict[str, str] = field(default_factory=dict)
    tables: dict[str, dict] = field(default_factory=dict)
    dataset_aliases: dict[str, list[str]] = field(default_factory=dict)
    margins: dict[str, dict] = field(default_factory=dict)  # claim id -> {metric, margin | relative, reason, quote}
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

    def difference(self, table_ids: list[str], dataset: str, setting: str, a: str, b: str, metric: str) -> float | None:
        """The paper's mean of ``a`` minus its mean of ``b``, each from the first of ``table_ids`` that has it
        (None when either is missing)."""
        means = []
        for method in (a, b):
            found = (self.value(t, dataset, setting, method, metric) for t in table_ids)
            record = next((r for r in found if r is not None), None)
            if record is None:
                return None
            means.append(float(record["mean"]))
        return means[0] - means[1]

    def paper_number(self, table_ids: list[str] | str, dataset: str, setting: str, method: str,
                     metric: str) -> PaperNumber | None:
        """The paper's mean of one cell with its standard error, from the first of ``table_ids`` that has the cell;
        the se comes from the table's ``uncertainty`` block (what its ± is, over how many runs), None where the
        paper prints no ± or the block is missing."""
        tables = [table_ids] if isinstance(table_ids, str) else list(table_ids)
        for table_id in tables:
            record = self.value(table_id, dataset, setting, method, metric)
            if record is None:
                continue
            block = self.tables[table_id].get("uncertainty") or {}
            n = (block.get("n_by_dataset") or {}).get(dataset, block.get("n"))
            se = None
            if block.get("kind") in SPREAD_KINDS and record.get("std") is not None:
                se = paper_standard_error(record["std"], block["kind"], n, block.get("ddof"))
            return PaperNumber(float(record["mean"]), record.get("std"), se, None if n is None else int(n), table_id,
                               record)
        return None

    def paper_difference(self, table_ids: list[str] | str, dataset: str, setting: str, a: str, b: str,
                         metric: str) -> PaperNumber | None:
        """The paper's a - b on one row with sqrt(se_a^2 + se_b^2) as its se (an overstatement: the paper's runs of
        a and b share splits); None when either cell is missing."""
        cells = [self.paper_number(table_ids, dataset, setting, m, metric) for m in (a, b)]
        if None in cells:
            return None
        first, second = cells
        n = min(c.n for c in cells) if first.n is not None and second.n is not None else None
        diff = first.mean - second.mean
        se, basis = difference_standard_error(first.se, second.se), "sqrt(se_a^2 + se_b^2), an overstatement"
        df = None
        if se is not None and first.n is not None and second.n is not None:
            df = welch_satterthwaite_df(first.se, first.n - 1, second.se, second.n - 1)
            df = float(2 * (n - 1)) if df is None else df  # two '± 0' cells: the df of equal spreads
        bound = self._dagger_bound(first, second, diff, n)
        if bound is not None and (se is None or bound < se):
            se, basis, df = bound, "bounded by the paper's paired t-test (†: p < .05), |diff| / t(.975, n - 1)", n - 1
        return PaperNumber(diff, None, se, n, first.table, None, (first, second), df, basis)

    def _dagger_bound(self, first: PaperNumber, second: PaperNumber, diff: float, n: int | None) -> float | None:
        """Where the paper marks a cell † (a paired t-test against ``marks.dagger_against`` over its n runs, p < .05),
        the paired difference's se is below |diff| / t(.975, n - 1): a tighter (still upper) bound than the
        sqrt formula, which ignores that both methods ran on the same splits."""
        marks = self.tables[first.table].get("marks") or {}
        against = marks.get("dagger_against")
        if not against or n is None or n < 2 or first.table != second.table:
            return None
        methods = (first.record["method"], second.record["method"])
        if against not in methods or methods[0] == methods[1]:
            return None
        other = first if methods[1] == against else second
        if not other.record.get("dagger"):
            return None
        return abs(diff) / float(stats.t.ppf(0.975, n - 1))

    def bold_rule_holds(self, table_ids: list[str] | str, dataset: str, setting: str, a: str, b: str,
                        metric: str) -> bool | None:
        """Whether the paper marks a against b as a difference by its own rule where the table says the rule is
        computable (QR: "Bold represents there is no overlap over 1 std interval"): the two mean ± std intervals do
        not overlap. None where the cells or the rule are missing."""
        diff = self.paper_difference(table_ids, dataset, setting, a, b, metric)
        if diff is None or not (self.tables[diff.table].get("marks") or {}).get("bold_rule"):
            return None
        first, second = diff.cells
        if first.std is None or second.std is None:
            return None
        low, high = sorted((first, second), key=lambda c: c.mean)
        return low.mean + float(low.std) < high.mean - float(high.std)

    def paper_datasets(self, table_id: str | None = None) -> list[str]:
        tables = [self.tables[table_id]] if table_id in self.tables else list(self.tables.values())
        seen: dict[str, None] = {}
        for table in tables:
            for record in table["records"]:
                seen.setdefault(record["dataset"], None)
        for name in self.dataset_aliases:
            seen.setdefault(name, None)
        return list(seen)


def load_reference(family: str, path: Path | None = None) -> Reference:
    """Read the family's published numbers (``paper_numbers.yaml`` in its package, or ``path``); an absent file gives
    an empty reference."""
    if path is None:
        from uqcal.methods.api import get_family

        path = get_family(family).paper_numbers_path
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
        margins=data.get("margins") or {},
        path=path,
    )


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


def paper_dataset_for(spec: dict, family: str) -> str | None:
    """The registry entry's ``paper_dataset`` for ``family``: a string applies to every family, a mapping
    ``{family: name}`` names it per family (our ``concrete`` is RIO's ``CCS`` and QR's ``Concrete Strength``)."""
    value = (spec or {}).get("paper_dataset")
    if isinstance(value, dict):
        value = value.get(family)
    return str(value) if value else None


def resolve_paper_name(name: str, reference: Reference, candidates: list[str] | None = None) -> str | None:
    """The reference's spelling of paper dataset ``name`` (exact, case-insensitive, or one of the names the
    reference's ``dataset_aliases`` list for it); None if the reference has no such dataset."""
    names = candidates if candidates is not None else reference.paper_datasets()
    wanted = name.strip().lower()
    for known in names:
        if known.lower() == wanted:
            return known
    for known in names:
        if wanted in [a.lower() for a in reference.dataset_aliases.get(known, [])]:
            return known
    return None


def relate_dataset(
    dataset: str, registry: dict, reference: Reference, candidates: list[str] | None = None,
    family: str | None = None,
) -> DatasetRelation:
    """How our dataset relates to the paper, from explicit registry keys only (never from words in free
    text): ``paper_dataset`` names the paper dataset whose published numbers go beside ours; the entry is
    the paper's own data unless it also has ``stands_in_for`` (free text: what it replaces), which makes it
    a stand-in. Without ``paper_dataset`` no paper numbers are shown."""
    spec = registry.get(dataset) or {}
    named = paper_dataset_for(spec, family or reference.family)
    paper = None
    if named:
        # A name the reference does not know (a family whose reference has no tables) is kept as a
        # label; uqcal validate-config rejects it where the reference has datasets to match.
        paper = resolve_paper_name(named, reference, candidates) or named
    stand_text = str(spec.get("stands_in_for") or "")
    if stand_text:
        return DatasetRelation(dataset, paper, "stand_in", stand_text)
    if paper:
        return DatasetRelation(dataset, paper, "same", named)
    return DatasetRelation(dataset, None, "none", "")


def paper_dataset_problems(config: dict) -> list[str]:
    """``paper_dataset`` entries of the datasets a config runs that name no dataset of that family's
    published tables (its package's paper_numbers.yaml), each with the names it could be."""
    problems = []
    references: dict[str, Reference] = {}
    for family, fam in config["families"].items():
        for dataset in fam["datasets"]:
            spec = config["datasets"][dataset]
            named = paper_dataset_for(spec, family)
            if not named:
                continue
            reference = references.setdefault(family, load_reference(family))
            known = reference.paper_datasets()
            if known and resolve_paper_name(named, reference) is None:
                problems.append(
                    f"datasets.{dataset}.paper_dataset: {named!r} is not a dataset of the {family} paper's published "
                    f"tables ({reference.path}); known: {known}"
                    + ("" if isinstance(spec.get("paper_dataset"), dict) else
                       f" (use a mapping, e.g. {{{family}: ...}}, to name it per family)")
                )
    return problems
