"""Validation at the data boundary: every problem of a dataset found at once, each naming the config key.

Three places, from cheapest to latest:

- :func:`config_problems` (``uqcal validate-config`` and the workflow's start, through
  ``uqcal.pipeline.config.semantics.check_semantics``): what the config alone decides -- column roles, the ``missing`` policy,
  reshape recipes, split parameters (``min_task_size`` >= N_S + N_Q, fractions that leave no part empty).
- :func:`check_frame` (``uqcal materialise``): what needs the data -- missing values (``missing: error``
  by default, or ``drop`` with the rows counted in the provenance record), a text or constant target,
  constant tasks, text features with more distinct values than ``max_categories``.
- :func:`check_partition` (``uqcal split``): enough tasks / classes that every part of the split is
  non-empty.

Each raises one :class:`DataValidationError` listing every problem found, so a user fixes them in one go.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import numpy as np
import pandas as pd

from uqcal.data.errors import DataSourceError, outside_repo_problem

MISSING_POLICIES = ("error", "drop")
DEFAULT_MAX_CATEGORIES = 20
# The largest magnitude a feature or target may hold: methods compute in float32, whose squares and sums of up
# to a million squares stay finite below it (float32's largest value is 3.4e38); 1e308 would be zeroed by a
# standardisation whose variance overflows, or fail in training.
MAX_MAGNITUDE = 1e15
REGRESSION_KINDS = ("single_task_regression", "multitask_regression")
RESHAPE_STEPS = ("melt", "lags", "grid_regions", "rename", "query")
log = logging.getLogger(__name__)


class DataValidationError(DataSourceError):
    """One or more problems with a dataset or a split; the message lists each with its config key."""


def fail(problems: list[str], what: str) -> None:
    if not problems:
        return
    if len(problems) == 1:
        raise DataValidationError(f"{what}: {problems[0]}")
    listed = "\n".join(f"  - {p}" for p in problems)
    raise DataValidationError(f"{what}: {len(problems)} problems:\n{listed}")


# --------------------------------------------------------------------------------- config alone
def dataset_spec_problems(name: str, spec: dict, families: Iterable[str] = ()) -> list[str]:
    """Problems of one registry entry that need no data (``families``: the names ``paper_dataset`` may use)."""
    key = f"datasets.{name}"
    problems = []
    kind = spec.get("kind")
    if kind in REGRESSION_KINDS + ("fewshot_classification",) and not spec.get("target"):
        problems.append(f"{key}.target: a {kind} dataset needs a target column")
    if kind == "multitask_regression" and not spec.get("task"):
        problems.append(f"{key}.task: a multitask_regression dataset needs a task column (or a reshape that "
                        "makes one, e.g. grid_regions)")
    features = spec.get("features")
    if isinstance(features, list):
        for role in ("target", "task", "group"):
            if spec.get(role) and spec[role] in features:
                problems.append(f"{key}.features: lists the {role} column {spec[role]!r}")
        duplicated = sorted({f for f in features if features.count(f) > 1})
        if duplicated:
            problems.append(f"{key}.features: lists {duplicated} more than once")
    paper = spec.get("paper_dataset")
    if isinstance(paper, dict):
        unknown = sorted(set(paper) - set(families))
        if unknown:
            problems.append(f"{key}.paper_dataset: unknown families {unknown}; known: {sorted(families)}")
    if spec.get("missing", "error") not in MISSING_POLICIES:
        problems.append(f"{key}.missing: {spec['missing']!r} is not one of {list(MISSING_POLICIES)}")
    problems += reshape_problems(name, spec.get("reshape"))
    problems += source_problems(name, spec.get("source") or {})
    return problems


# Sources whose keys are known without the data: module, required keys.
_CHECKED_SOURCES = {"csv": ("uqcal.data.sources.csv", ("path",)), "url": ("uqcal.data.sources.url", ("url",)),
                    "array": ("uqcal.data.sources.array", ())}


def source_problems(name: str, source: dict) -> list[str]:
    import importlib

    kind = source.get("type")
    if kind not in _CHECKED_SOURCES:
        return []
    module, required = _CHECKED_SOURCES[kind]
    allowed = importlib.import_module(module).SPEC_KEYS
    key = f"datasets.{name}.source"
    problems = []
    unknown = sorted(set(source) - set(allowed))
    if unknown:
        problems.append(f"{key}: unknown key(s) {unknown} for a {kind} source; allowed: {sorted(set(allowed) - {'type'})}")
    problems += [f"{key}: a {kind} source needs `{r}:`" for r in required if not source.get(r)]
    if kind == "array" and bool(source.get("path")) == bool(source.get("sample_data")):
        problems.append(f"{key}: an array source needs exactly one of `path:` or `sample_data:`")
    if kind in ("csv", "array"):
        outside = outside_repo_problem(source, kind, name=name)
        if outside:
            problems.append(f"{key}.path: {outside}")
    return problems


def reshape_problems(name: str, recipe) -> list[str]:
    key = f"datasets.{name}.reshape"
    if not recipe:
        return []
    if not isinstance(recipe, dict):
        return [f"{key}: must map step names to their options, got {recipe!r}"]
    problems = []
    unknown = sorted(set(recipe) - set(RESHAPE_STEPS))
    if unknown:
        problems.append(f"{key}: unknown step(s) {unknown}; known: {list(RESHAPE_STEPS)}")
    if "grid_regions" in recipe:
        from uqcal.data.grid import grid_regions_problems

        problems += grid_regions_problems(f"{key}.grid_regions", recipe["grid_regions"])
    return problems


def _fractions_problem(values, key: str) -> str | None:
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        return f"{key}: must be three fractions, got {values!r}"
    if arr.shape != (3,) or np.any(arr <= 0) or not np.isclose(arr.sum(), 1.0):
        return (f"{key}: must be three positive fractions (train, val, test) summing to 1, got {list(values)}; "
                "every part of the split needs at least one task or class")
    return None


def _positive_int(params: dict, name: str, key: str, minimum: int = 1) -> str | None:
    value = params.get(name)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        return f"{key}.{name}: must be an integer >= {minimum}, got {value!r}"
    return None


def no_split_problems(params: dict, key: str) -> list[str]:
    return []


def multitask_split_problems(params: dict, key: str) -> list[str]:
    """Problems of a setting's uqcal.data.splits.multitask_split parameters (``key``: where they come from,
    e.g. ``families.<f>.settings.ns10 (+ split)``)."""
    problems: list[str | None] = []
    if "n_support" not in params:
        problems.append(f"{key}: needs n_support (the support-set size N_S)")
    for name in ("n_support", "n_query", "min_task_size", "val_episodes_per_task", "test_episodes_per_task"):
        problems.append(_positive_int(params, name, key))
    if not problems or all(p is None for p in problems):
        n_s, n_q = int(params["n_support"]), int(params.get("n_query", 30))
        min_size = int(params.get("min_task_size", n_s + n_q))
        if min_size < n_s + n_q:
            problems.append(f"{key}.min_task_size: {min_size} < n_support + n_query = {n_s} + {n_q} = "
                            f"{n_s + n_q}; a task needs N_S + N_Q rows for one episode (raise min_task_size or "
                            "lower n_query)")
    if "task_fractions" in params:
        problems.append(_fractions_problem(params["task_fractions"], f"{key}.task_fractions"))
    return [p for p in problems if p]


def fewshot_split_problems(params: dict, key: str) -> list[str]:
    """Problems of a setting's uqcal.data.splits.fewshot_split parameters."""
    problems = [_positive_int(params, "n_way", key, minimum=2), _positive_int(params, "k_shot", key)]
    for name in ("n_query_test", "n_query_train", "n_val_episodes", "n_test_episodes"):
        problems.append(_positive_int(params, name, key))
    if "n_way" not in params or "k_shot" not in params:
        problems.append(f"{key}: needs n_way and k_shot")
    if "class_fractions" in params:
        problems.append(_fractions_problem(params["class_fractions"], f"{key}.class_fractions"))
    return [p for p in problems if p]


def holdout_split_problems(params: dict, key: str) -> list[str]:
    frac = params.get("test_fraction", 0.2)
    if not isinstance(frac, (int, float)) or not 0 < frac < 1:
        return [f"{key}.test_fraction: must be in (0, 1), got {frac!r}"]
    return []


def kfold_split_problems(params: dict, key: str) -> list[str]:
    problem = _positive_int(params, "folds", key, minimum=2)
    return [problem] if problem else []


def train_val_test_split_problems(params: dict, key: str) -> list[str]:
    test, val = params.get("test_fraction", 0.2), params.get("val_fraction", 0.1)
    problems = []
    for name, frac in (("test_fraction", test), ("val_fraction", val)):
        if not isinstance(frac, (int, float)) or isinstance(frac, bool) or not 0 < frac < 1:
            problems.append(f"{key}.{name}: must be in (0, 1), got {frac!r}")
    if not problems and test + val >= 1:
        problems.append(f"{key}: test_fraction + val_fraction = {test + val:g} leaves no training rows")
    return problems


def initial_design_split_problems(params: dict, key: str) -> list[str]:
    problem = _positive_int(params, "n_init", key)
    return [problem] if problem else []


def config_problems(config: dict, split_problems: dict, families: Iterable[str]) -> list[str]:
    """Every dataset-entry and split-parameter problem of the datasets and settings a config uses.

    ``split_problems``: each family's check of its split parameters (its splitter's ``problems``);
    ``families``: the names a dataset's ``paper_dataset`` mapping may use."""
    used = {}
    for fam in config["families"].values():
        for dataset in fam["datasets"]:
            used.setdefault(dataset, None)
    problems = []
    for dataset in used:
        problems += dataset_spec_problems(dataset, config["datasets"][dataset], families)
    for family, fam in config["families"].items():
        for setting, values in fam["settings"].items():
            # as the jobs get them: without the run selectors (uqcal.pipeline.config.runs.SETTING_SELECTORS)
            selectors = ("datasets", "seeds")
            params = {**(fam.get("split") or {}), **{k: v for k, v in (values or {}).items() if k not in selectors}}
            problems += split_problems[family](params, f"families.{family}.settings.{setting} (with split)")
    return problems


# --------------------------------------------------------------------------------- with the data
def role_columns(spec: dict, frame: pd.DataFrame) -> dict[str, list[str]]:
    """The columns a dataset uses, by role: target, task, group and features (``auto`` resolved)."""
    roles = {role: [spec[role]] for role in ("target", "task", "group") if spec.get(role) and spec[role] in frame}
    features = spec.get("features", "auto")
    if spec.get("kind") == "fewshot_classification" and features == "auto":
        roles["features"] = []  # few-shot methods read the images (px columns) only
    elif features == "auto":
        taken = {spec.get("target"), spec.get("task"), spec.get("group"), "domain"}
        roles["features"] = [c for c in frame.columns if c not in taken and not c.startswith("px")]
    else:
        roles["features"] = [c for c in features if c in frame]
    roles["pixels"] = [c for c in frame.columns if c.startswith("px")] if spec.get("image_shape") else []
    return roles


def _shown(values: Iterable, limit: int = 5) -> str:
    values = list(values)
    more = f", ... ({len(values)} in all)" if len(values) > limit else ""
    return ", ".join(repr(v.item() if isinstance(v, np.generic) else v) for v in values[:limit]) + more


def _columns_hint(frame: pd.DataFrame) -> str:
    columns = [str(c) for c in frame.columns]
    shown = columns[:40]
    return f"available columns: {shown}{' ...' if len(columns) > 40 else ''}"


def check_frame(name: str, spec: dict, frame: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """Validate a materialised frame against its registry entry; return it (rows with missing values
    dropped under ``missing: drop``) and what to add to the provenance record. Raises one
    :class:`DataValidationError` with every problem."""
    key = f"datasets.{name}"
    kind = spec["kind"]
    problems = []
    for role in ("target", "task", "group"):
        column = spec.get(role)
        if column and column not in frame.columns and not (role == "group" and kind == "fewshot_classification"):
            problems.append(f"{key}.{role}: column {column!r} is not in the data; {_columns_hint(frame)}")
    if isinstance(spec.get("features"), list):
        absent = [c for c in spec["features"] if c not in frame.columns]
        if absent:
            problems.append(f"{key}.features: columns {absent} are not in the data; {_columns_hint(frame)}")
    if kind == "optimisation_objective" or problems:
        fail(problems, f"dataset {name!r}")
        return frame, {}

    roles = role_columns(spec, frame)
    used = list(dict.fromkeys(c for cols in roles.values() for c in cols))
    record: dict = {}

    # Missing values (and infinities, which no method can use either) in the columns the dataset uses,
    # column by column: numpy integer and bool columns hold neither, so wide pixel tables cost nothing.
    bad_rows = np.zeros(len(frame), dtype=bool)
    per_column = {}
    for column in used:
        values = frame[column]
        if isinstance(values.dtype, np.dtype) and values.dtype.kind in "iub":
            continue
        bad = values.isna().to_numpy().copy()
        if isinstance(values.dtype, np.dtype) and values.dtype.kind == "f":
            bad |= np.isinf(values.to_numpy())
        if bad.any():
            per_column[column] = int(bad.sum())
            bad_rows |= bad
    if bad_rows.any():
        per_column = {c: per_column[c] for c in frame.columns if c in per_column}
        policy = spec.get("missing", "error")
        if policy == "drop":
            frame = frame.loc[~bad_rows].reset_index(drop=True)
            record = {"rows_dropped_missing": int(bad_rows.sum()), "missing_by_column": per_column}
        else:
            problems.append(
                f"{key}: {int(bad_rows.sum())} of {len(bad_rows)} rows have missing or infinite values in the columns "
                f"used (per column: {per_column}); set `missing: drop` on the dataset to drop those rows (counted in "
                "its provenance record), or leave the columns out (`drop:` / `features:`)"
            )
    if frame.empty:
        problems.append(f"{key}: no rows left" + (" after dropping rows with missing values" if record else ""))
        fail(problems, f"dataset {name!r}")
    problems += _magnitude_problems(key, frame, used)

    target = spec.get("target")
    if kind in REGRESSION_KINDS and target in frame:
        column = frame[target]
        if not pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
            as_number = pd.to_numeric(column, errors="coerce")
            text = column[as_number.isna() & column.notna()].astype(str).unique()
            problems.append(
                f"{key}.target: column {target!r} holds text (e.g. {_shown(text, 3)}), but a regression target must "
                "be numeric; choose a numeric column as `target:`"
                + (", or, if the text marks missing values, read it as missing (e.g. `read: {na_values: ['?']}` "
                   "on a csv/url source) with `missing: drop`" if as_number.notna().any() else "")
            )
        elif column.nunique(dropna=True) < 2:
            problems.append(f"{key}.target: column {target!r} is constant ({_shown(column.unique()[:1])} in every "
                            "row); there is nothing to predict")
        elif kind == "multitask_regression" and spec.get("task") in frame:
            # Only warned here: the split's min_task_size may drop these tasks anyway, and the split refuses a
            # constant task it keeps (constant_task_problem).
            grouped = frame.groupby(spec["task"], sort=True)[target]
            size, spread = grouped.size(), grouped.nunique()
            one_row = size.index[size < 2].tolist()
            constant = spread.index[(spread < 2) & (size >= 2)].tolist()
            if one_row:
                log.warning("%s.task: %d of %d tasks have one row (%s); every split drops them (min_task_size >= 2)",
                            key, len(one_row), len(size), _shown(one_row))
            if constant:
                log.warning("%s.task: %d of %d tasks have a constant target (%s); a split whose min_task_size keeps "
                            "one of them fails", key, len(constant), len(size), _shown(constant))

    limit = int(spec.get("max_categories", DEFAULT_MAX_CATEGORIES))
    for column in roles["features"]:
        values = frame[column]
        if pd.api.types.is_numeric_dtype(values):
            continue
        levels = values.nunique(dropna=True)
        if levels > limit:
            problems.append(
                f"{key}.features: text column {column!r} has {levels} distinct values in {len(frame)} rows (e.g. "
                f"{_shown(values.dropna().unique(), 3)}); one-hot encoding would add {levels} features. Leave it out "
                f"(`drop: [{column}]` or an explicit `features:` list), or set `max_categories: {levels}` (now "
                f"{limit}) on the dataset to encode it anyway"
            )
    fail(problems, f"dataset {name!r}")
    return frame, record


def _magnitude_problems(key: str, frame: pd.DataFrame, columns: list[str]) -> list[str]:
    """Columns holding a value beyond ``MAX_MAGNITUDE`` (float and 64-bit integer columns: narrower integers and
    booleans cannot, so wide pixel tables cost nothing)."""
    problems = []
    for column in columns:
        values = frame[column]
        if not isinstance(values.dtype, np.dtype) or values.dtype.kind not in "iuf" or \
                (values.dtype.kind in "iu" and values.dtype.itemsize < 8):
            continue
        magnitude = np.abs(values.to_numpy(dtype=np.float64))
        too_big = np.isfinite(magnitude) & (magnitude > MAX_MAGNITUDE)  # infinities: reported as missing above
        if too_big.any():
            problems.append(f"{key}: column {column!r} holds {int(too_big.sum())} value(s) beyond ±{MAX_MAGNITUDE:.0e} "
                            f"(largest {float(magnitude.max()):.3g}), which float32 computation cannot use; rescale "
                            "the column (another unit) or leave it out (`drop:` / `features:`)")
    return problems


# --------------------------------------------------------------------------------- at the split
def constant_task_problem(dataset: str, task_column: str, targets: dict, min_size: int, n_tasks: int) -> str | None:
    """The split's check of the tasks it keeps (``targets``: task -> its target values, every task with at
    least ``min_size`` rows): a task whose target does not vary makes every predictive variance degenerate."""
    constant = sorted(t for t, y in targets.items() if np.unique(np.asarray(y)).size < 2)
    if not constant:
        return None
    return (f"datasets.{dataset}.task ({task_column!r}): {len(constant)} of the {len(targets)} tasks that "
            f"split.min_task_size = {min_size} keeps (of {n_tasks}) have a constant target ({_shown(constant)}); a "
            "task without spread makes every predictive variance degenerate; drop them, e.g. with "
            "`reshape: {query: ...}`, or raise min_task_size past their size")


def partition_sizes(n: int, fractions) -> list[int]:
    """Sizes of the (train, val, test) parts of ``n`` items, as ``uqcal.data.splits`` cuts them: rounded
    fractions, then every part with a positive fraction given at least one item (taken from the largest
    part) where there are enough items."""
    fractions = np.asarray(fractions, dtype=float)
    n_train = int(round(fractions[0] * n))
    n_val = int(round(fractions[1] * n))
    sizes = [n_train, n_val, n - n_train - n_val]
    for part in range(3):
        if fractions[part] > 0 and sizes[part] == 0:
            largest = int(np.argmax(sizes))
            if sizes[largest] > 1:
                sizes[largest] -= 1
                sizes[part] += 1
    return sizes


def check_partition(dataset: str, what: str, n_items: int, fractions, needed: int, hint: str) -> None:
    """Raise if ``n_items`` (tasks / classes / script groups) cannot give every part ``needed`` items."""
    sizes = partition_sizes(n_items, fractions)
    short = [part for part, size in zip(("train", "val", "test"), sizes, strict=True) if size < needed]
    if short:
        raise DataValidationError(
            f"dataset {dataset!r}: {n_items} eligible {what} split by fractions {[round(float(f), 3) for f in fractions]} give "
            f"train {sizes[0]} / val {sizes[1]} / test {sizes[2]}; every part needs at least {needed} "
            f"({', '.join(short)} do not). {hint}"
        )
