"""The fewshot family's estimator protocol (numpy and pandas only): ``FewShotClassifier``, the base of every
method, with the pipeline's ``train`` built on its ``fit`` / ``predict``; the array checks; the split's
episodes as arrays; the predictions frame.

A few-shot classifier is fitted on a labelled pool of base classes (``fit(X, y)``; N-way K-shot episodes are
drawn inside) and predicts the queries of a new episode from its support set (``predict(X_support, y_support,
X_query)``), as class probabilities over the support's classes (``EpisodePredictive``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from uqcal.core.predictive import CategoricalPredictive
from uqcal.methods.api import ParameterError, RunContext
from uqcal.methods.estimator import Method

# Column prefixes of the recalibrated predictives (temperature_scaling.py): the authors' temperature pair chosen
# by validation ECE / by validation MCE; one temperature chosen by validation NLL.
if TYPE_CHECKING:
    from numpy.typing import ArrayLike

RECALIBRATED = ("ts", "tsm", "nllts")


@dataclass(frozen=True, eq=False)
class EpisodePredictive(CategoricalPredictive):
    """The predictive of one episode's queries: ``probs`` (n_query, C) over ``classes`` (the sorted support
    labels), and ``recalibrated``, the same queries under each recalibration fitted on the validation episodes
    (``"ts"``, ``"tsm"``, ``"nllts"``: see temperature_scaling.py), each a CategoricalPredictive; empty when the
    estimator fitted none (no validation, or ``recalibrate=False``).

    Parameters
    ----------
    probs : array_like of shape (n_query, C)
        Class probabilities of the queries, rows summing to 1.
    classes : array_like of shape (C,), optional
        The class of each column (the sorted support labels).
    recalibrated : dict of str to CategoricalPredictive, optional
        The same queries under each fitted recalibration.
    """

    recalibrated: dict[str, CategoricalPredictive] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------- array checks
def check_images(name: str, images, image_shape: tuple[int, int] | None = None) -> np.ndarray:
    """``images`` as a float32 array (n, H, W) of grayscale images (the glyph datasets' Table.images)."""
    try:
        arr = np.asarray(images, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} cannot be converted to a float array ({exc})") from exc
    if arr.ndim != 3:
        raise ValueError(f"{name} must be (n, H, W) grayscale images, got shape {arr.shape}")
    if image_shape is not None and arr.shape[1:] != tuple(image_shape):
        raise ValueError(f"{name} has {arr.shape[1]}x{arr.shape[2]} images, but the model was fitted on "
                         f"{image_shape[0]}x{image_shape[1]} images")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} has non-finite pixels")
    return arr


def check_labels(name: str, labels, n: int) -> np.ndarray:
    """Integer class labels, one per image: float (or boolean) labels are refused, naming ``name``."""
    arr = np.asarray(labels)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"{name} must be 1-D with one label per image ({n}), got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer) or arr.dtype == bool:
        raise ValueError(f"{name}: class labels must be integers, got dtype {arr.dtype}"
                         + (f" (e.g. {arr[0]!r})" if arr.size else ""))
    return arr.astype(np.int64)


def check_episode_shape(n_way, k_shot, n_query, n_val_episodes) -> None:
    for key, value, low in (("n_way", n_way, 2), ("k_shot", k_shot, 1), ("n_query", n_query, 1),
                            ("n_val_episodes", n_val_episodes, 1)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"{key} must be an integer >= {low}, got {value!r}")


def support_classes(y_support, n_way: int | None = None) -> np.ndarray:
    """The sorted classes of a support set (the columns of the prediction); ``n_way`` of them when given."""
    classes = np.unique(y_support)
    if n_way is not None and len(classes) != n_way:
        raise ValueError(f"y_support has {len(classes)} classes {classes.tolist()[:10]}, but the model was fitted "
                         f"for {n_way}-way episodes (fit(..., n_way={n_way}))")
    return classes


def is_episode_list(validation) -> bool:
    """True for a sequence of episodes (X_support, y_support, X_query, y_query); False for a pool (X, y)."""
    first = validation[0] if len(validation) else None
    # an episode's second item is its support labels (1-D); a pool's first item is its images, whose second is 2-D
    return isinstance(first, (tuple, list)) and len(first) == 4 and np.ndim(first[1]) == 1


class EpisodeArrays(Sequence):
    """Episodes as rows of one labelled pool (a split's ``val_episodes`` / ``test_episodes``, or episodes drawn
    from a validation pool): item i is (X_support, y_support, X_query, y_query), each label the position of the
    row's class in the episode's class list (so the sorted labels keep the episode's class order)."""

    def __init__(self, images: np.ndarray, labels: np.ndarray, specs: list[dict]):
        self.images, self.labels, self.specs = images, labels, specs

    def __len__(self) -> int:
        return len(self.specs)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return EpisodeArrays(self.images, self.labels, self.specs[i])
        spec = self.specs[i]
        classes = list(spec["classes"])
        support, query = list(spec["support"]), list(spec["query"])
        if set(support) & set(query):
            raise ValueError(f"episode {i}: support and query share rows")
        return (self.images[support], episode_labels(support, classes, self.labels),
                self.images[query], episode_labels(query, classes, self.labels))


def episode_labels(rows, episode_classes, y) -> np.ndarray:
    """Position of each row's class in the episode's class list (0..C-1); errors name the stray class."""
    position = {str(c): i for i, c in enumerate(episode_classes)}
    labels = []
    for row in rows:
        cls = str(y[row])
        if cls not in position:
            raise ValueError(
                f"row {row} has class {cls!r}, not among the episode's classes {episode_classes}"
            )
        labels.append(position[cls])
    return np.asarray(labels, dtype=np.int64)


def check_class_disjoint(split: dict) -> None:
    """Train, val and test classes must be disjoint, and every episode must stay inside its side."""
    sides = {k: set(map(str, v)) for k, v in split["classes"].items()}
    for a in sides:
        for b in sides:
            if a < b and sides[a] & sides[b]:
                raise ValueError(
                    f"split classes overlap between {a} and {b}: {sorted(sides[a] & sides[b])[:5]}"
                )
    for name, side in (("val_episodes", "val"), ("test_episodes", "test")):
        for i, ep in enumerate(split.get(name, [])):
            stray = set(map(str, ep["classes"])) - sides[side]
            if stray:
                raise ValueError(f"{name}[{i}] uses classes {sorted(stray)} outside the {side} classes")


def per_run_params(params: dict, dataset: str, setting: str) -> dict:
    """A parameter given as a mapping {dataset or setting name: value} takes this run's value (e.g. the
    paper's kernel per dataset, or its 40k / 60k training episodes per setting)."""
    out = dict(params)
    for key, value in params.items():
        if isinstance(value, dict):
            hits = [value[k] for k in (dataset, setting) if k in value]
            if len(hits) != 1:
                raise ValueError(
                    f"parameter {key!r} = {value!r} must name exactly one of this run's dataset {dataset!r} "
                    f"or setting {setting!r}"
                )
            out[key] = hits[0]
    return out


def validation_checks(n_episodes: int, val_every: int, sparse_every: int = 0, dense_epochs: int = 0) -> list[int]:
    """The training episodes after which the validation check runs (the best-validation checkpoint).

    An epoch is ``val_every`` episodes (the authors' 100). With ``sparse_every`` = 0, every epoch is checked;
    else the authors' train.py: after epoch e (0-based) when ``e % sparse_every == 0`` or ``e > epochs -
    dense_epochs`` (their ``epoch % 30 == 0`` or ``epoch > stop_epoch - 100``; every epoch for Omniglot->EMNIST).
    The last episode is always checked (a run of a part of an epoch). ``val_every`` 0: no check."""
    if val_every <= 0 or n_episodes <= 0:
        return []
    epochs = n_episodes // val_every
    found = [(e + 1) * val_every for e in range(epochs)
             if sparse_every <= 0 or e % sparse_every == 0 or e > epochs - dense_epochs]
    return found if found and found[-1] == n_episodes else [*found, n_episodes]


def predictions_frame(predictions: list[EpisodePredictive], labels: list[np.ndarray]) -> pd.DataFrame:
    """episode, label, p0..p{C-1} (the model's predictive), and per recalibration `<prefix>_p0..`."""
    rows = []
    for episode, (prediction, label) in enumerate(zip(predictions, labels, strict=True)):
        frame = pd.DataFrame({"episode": episode, "label": np.asarray(label, dtype=np.int64)})
        for c in range(prediction.probs.shape[1]):
            frame[f"p{c}"] = prediction.probs[:, c]
        for prefix, recalibrated in prediction.recalibrated.items():
            for c in range(recalibrated.probs.shape[1]):
                frame[f"{prefix}_p{c}"] = recalibrated.probs[:, c]
        rows.append(frame)
    return pd.concat(rows, ignore_index=True)


class FewShotClassifier(Method):
    """Base of the fewshot family's estimators.

    ``fit(X, y, validation=None, *, n_way=5, k_shot=1, n_query=16, n_val_episodes=100)`` on a labelled pool of
    base classes, then ``predict(X_support, y_support, X_query)`` -> ``EpisodePredictive`` for each new episode.
    ``train(ctx)`` (the pipeline) fits on the split's train classes with its validation episodes and predicts
    its test episodes through the same two calls.

    Parameters
    ----------
    params : dict, optional
        Parameters as one mapping (positional only); keyword arguments add to it.
    random_state : int, numpy.random.Generator or None, default None
        The seed of the estimator's random streams (episodes, initial weights, MC samples).
    device : str or torch.device, default "cpu"
        Where torch computes.
    **kwargs
        The class's ``defaults``; a value may be a {dataset or setting: value} mapping that a pipeline run
        resolves.
    """

    run_mappings = True  # in a config, a parameter may be {dataset or setting: value} (per_run_params)
    # String parameters and their allowed values (checked by the constructor, naming the key).
    choices: dict[str, tuple[str, ...]] = {}

    def __init__(self, params: dict[str, Any] | None = None, /, *,
                 random_state: int | np.random.Generator | np.random.RandomState | None = None, device: Any = "cpu",
                 **kwargs: Any):
        super().__init__(params, random_state=random_state, device=device, **kwargs)
        where = type(self).__name__
        for key, allowed in self.choices.items():
            value = self.params[key]
            for item in (value.values() if isinstance(value, dict) else [value]):
                if item not in allowed:
                    raise ParameterError(f"{where}.{key}: expected one of {list(allowed)}, got {item!r}")

    def check_single_values(self) -> None:
        """A {dataset or setting: value} mapping is the pipeline's (train picks the run's value): fit needs one."""
        for key, value in self.params.items():
            if isinstance(value, dict):
                raise ValueError(f"{type(self).__name__}.{key} = {value!r}: a {{dataset or setting: value}} mapping "
                                 "is resolved by a pipeline run; give fit a single value")

    def fit(self, X: ArrayLike, y: ArrayLike, validation: tuple | Sequence | None = None, *, n_way: int = 5,
            k_shot: int = 1, n_query: int = 16,
            n_val_episodes: int = 100) -> FewShotClassifier:  # pragma: no cover - abstract
        """Learn from a labelled pool of base classes: X (n, H, W) float grayscale images, y (n,) integer
        labels; ``n_way``-way ``k_shot``-shot episodes with ``n_query`` queries a class are drawn from it.
        ``validation``: None, a pool (X_val, y_val) of other classes (``n_val_episodes`` episodes are drawn from
        it) or a sequence of episodes (X_support, y_support, X_query, y_query). Returns self.

        Parameters
        ----------
        X : array_like of shape (n, H, W)
            Float grayscale images of the base classes.
        y : array_like of shape (n,)
            Their integer class labels.
        validation : tuple, sequence of tuple or None, default None
            None, a pool ``(X_val, y_val)`` of other classes, or episodes ``(X_support, y_support, X_query, y_query)``.
        n_way, k_shot, n_query : int, default 5, 1 and 16
            The episodes' classes, support images a class and query images a class.
        n_val_episodes : int, default 100
            Episodes drawn from a validation pool.

        Returns
        -------
        FewShotClassifier
            self, fitted.
        """
        raise NotImplementedError

    def predict(self, X_support: ArrayLike, y_support: ArrayLike,
                X_query: ArrayLike) -> EpisodePredictive:  # pragma: no cover - abstract
        """Class probabilities (q, C) of the q images X_query over the C classes of the support set (X_support
        (m, H, W), integer labels y_support (m,)); ``classes`` = the sorted support labels.

        Parameters
        ----------
        X_support : array_like of shape (m, H, W)
            The support images.
        y_support : array_like of shape (m,)
            Their integer labels.
        X_query : array_like of shape (q, H, W)
            The query images.

        Returns
        -------
        EpisodePredictive
            (q, C) probabilities over ``classes`` = the sorted support labels.
        """
        raise NotImplementedError

    def run_outputs(self, n_test_episodes: int, test_seconds: float) -> tuple[Any, dict]:  # pragma: no cover
        """What a pipeline run saves beside its predictions: (model.pt's object, train_stats.json's entries).

        Parameters
        ----------
        n_test_episodes : int
            The number of test episodes predicted.
        test_seconds : float
            The seconds their prediction took.

        Returns
        -------
        tuple of (object, dict)
            What model.pt holds and the entries of train_stats.json.
        """
        raise NotImplementedError

    def train(self, ctx: RunContext) -> None:
        """The pipeline's entry: fit on the split's train classes (labels: their positions in the split's list)
        with its validation episodes, predict each test episode, save the predictions frame.

        Parameters
        ----------
        ctx : RunContext
            The run's data, split, setting and output paths.
        """
        self.runtime = ctx.runtime
        self.params = per_run_params(self.params, ctx.dataset, ctx.setting)
        table, split = ctx.load_data(), ctx.load_split()
        if getattr(table, "images", None) is None:
            raise ValueError(f"dataset {ctx.dataset!r} has no images; fewshot methods need Table.images")
        check_class_disjoint(split)
        images = check_images(f"dataset {ctx.dataset!r}: Table.images", table.images)
        names = np.asarray([str(v) for v in np.asarray(table.y).tolist()], dtype=object)
        if len(names) != len(images):
            raise ValueError(f"dataset {ctx.dataset!r}: {len(images)} images but {len(names)} labels")
        train_classes = [str(c) for c in split["classes"]["train"]]
        missing = sorted(set(train_classes) - set(names))
        if missing:
            raise ValueError(f"classes {missing[:5]} of the split have no rows in the data")
        code = {c: i for i, c in enumerate(train_classes)}
        rows = np.flatnonzero(np.isin(names, train_classes))  # ascending: each class keeps its rows' order
        n_query_train = int((ctx.family_params.get("split") or {}).get("n_query_train", 16))
        self.fit(images[rows], np.array([code[n] for n in names[rows]], dtype=np.int64),
                 EpisodeArrays(images, names, split["val_episodes"]),
                 n_way=int(split["n_way"]), k_shot=int(split["k_shot"]), n_query=n_query_train)
        started = time.perf_counter()
        predictions, labels = [], []
        for X_support, y_support, X_query, y_query in EpisodeArrays(images, names, split["test_episodes"]):
            prediction = self.predict(X_support, y_support, X_query)
            predictions.append(prediction)
            labels.append(prediction.labels(y_query))
        model, stats = self.run_outputs(len(predictions), time.perf_counter() - started)
        ctx.save_outputs(predictions_frame(predictions, labels), model, stats)
