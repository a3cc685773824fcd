"""The paper's own hyperparameter-tuning tasks of calibrated Bayesian optimisation (Deshpande & Kuleshov Sec. 5.3).

Used by the ``hpo`` source (``uqcal.data.sources.hpo``): this module only knows how to get the data
(downloads through the ``url`` source: streamed, sha256-checked, pinned in ``config/datasets.lock.json``,
never a partial file) and how to score one configuration. Caching and the search spaces stay in
``hpo.py`` (``HPOFunction``), so there is one evaluation path for every hpo objective.

- ``lda`` on ``20news``: online LDA (sklearn, ``learning_method="online"``, Hoffman et al. 2010) on the
  20 Newsgroups "by-date" archive. Headers (text before the first blank line) are stripped; bag-of-words
  counts from ``CountVectorizer(max_features=vocabulary, stop_words="english")`` fitted on the training
  documents. As in the paper, ``train_docs`` (11,000) random documents of the by-date training half are
  the training set and ``test_docs`` (2,200) random documents of the test half the held-out set (seed
  ``seed``); the value is sklearn's held-out perplexity after ``max_iter`` passes with ``topics`` topics.
- ``cnn`` on ``cifar10`` / ``svhn``: a small CNN trained with the paper's Table 1 hyperparameters; the
  value is the test error (the paper's objective). Architecture: three blocks of
  ``Conv2d(3x3, padding 1, conv_filters channels) -> ReLU -> MaxPool2d(2)`` (32 -> 16 -> 8 -> 4 pixels),
  then ``Linear(conv_filters*16, fc_units) -> ReLU -> Linear(fc_units, 10)``. SGD with momentum 0.9,
  cross-entropy, learning rate ``lr_t = learning_rate / (1 + lr_decay * t)`` per optimiser step t (Keras'
  ``decay``), L2 penalty ``l2 * sum(w**2)`` on the conv/fc weights (not biases; weight decay 2*l2), inputs
  scaled to [0, 1] and standardised per channel with the training mean/std. ``epochs`` passes over the
  (optionally subsampled: ``train_size``/``test_size``) training set, mini-batch order from
  ``numpy.random.default_rng([seed, epoch])``, initial weights from ``torch.manual_seed(seed)`` inside
  ``torch.random.fork_rng`` (the caller's torch RNG is untouched), cuDNN in deterministic mode. A run
  whose training loss becomes non-finite stops; test images with non-finite logits count as errors, so a
  diverged configuration scores (near) 1.

Readers (arrays, not tables): :func:`read_20news` (``20news-bydate.tar.gz``), :func:`read_cifar10`
(``cifar-10-binary.tar.gz``: ``data_batch_1..5.bin`` and ``test_batch.bin``, records of one label byte and
the 1024 red, then green, then blue pixels of a 32x32 image; no pickle is read), :func:`read_svhn` (``train_32x32.mat`` / ``test_32x32.mat``:
``X`` is 32x32x3xN, ``y`` in 1..10 with 10 meaning the digit 0). Images come back as uint8 (N, 3, 32, 32).
"""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

import numpy as np

from uqcal.data.errors import DataSourceError

# data -> (model, download roles). One archive for 20news and CIFAR-10, two .mat files for SVHN.
PAPER_DATA = {
    "20news": ("lda", ("archive",)),
    "cifar10": ("cnn", ("archive",)),
    "svhn": ("cnn", ("train", "test")),
}
PAPER_NAMES = {"20news": "20 Newsgroups (by-date)", "cifar10": "CIFAR-10", "svhn": "SVHN (cropped digits)"}
_CNN_OPTIONS = {"epochs": 10, "train_size": None, "test_size": None, "device": "auto", "seed": 0}
DEFAULT_OPTIONS = {
    "20news": {"vocabulary": 10000, "topics": 20, "max_iter": 10, "train_docs": 11000, "test_docs": 2200,
               "seed": 0},
    "cifar10": dict(_CNN_OPTIONS),
    "svhn": dict(_CNN_OPTIONS),
}
# Options that change how, not what, is computed: left out of the evaluation cache key.
EXECUTION_OPTIONS = ("device",)
DOWNLOAD_KEYS = {"url", "filename", "sha256", "retries", "backoff", "timeout"}


# ------------------------------------------------------------------------------------------ specs
def validate_options(data: str, options) -> dict:
    """The spec's ``options`` merged over the defaults (unknown keys fail, naming the allowed ones)."""
    if options is None:
        options = {}
    if not isinstance(options, dict):
        raise ValueError(f"hpo source: options must be a mapping, got {options!r}")
    defaults = DEFAULT_OPTIONS[data]
    unknown = set(options) - set(defaults)
    if unknown:
        raise ValueError(f"hpo source: data {data}: unknown option(s) {sorted(unknown)}; "
                         f"allowed: {sorted(defaults)}")
    merged = {**defaults, **options}
    for key, value in merged.items():
        if key == "device":
            continue
        if value is None and key in ("train_size", "test_size"):
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < (0 if key == "seed" else 1):
            raise ValueError(f"hpo source: data {data}: option {key} must be a positive integer, got {value!r}")
    return merged


def validate_download(data: str, download) -> dict[str, dict]:
    """``download:`` of a paper data set: one url-source spec per role (``archive``, or ``train``/``test``)."""
    roles = PAPER_DATA[data][1]
    if not isinstance(download, dict) or not download:
        raise ValueError(f"hpo source: data {data} needs `download:` with {'/'.join(roles)} url entries "
                         "(see config/datasets.paper.yaml)")
    if roles == ("archive",) and "url" in download:  # one file: the role may be left out
        download = {"archive": download}
    if set(download) != set(roles):
        raise ValueError(f"hpo source: data {data}: download needs exactly the entries {list(roles)}, "
                         f"got {sorted(download)}")
    specs = {}
    for role in roles:
        entry = download[role]
        if not isinstance(entry, dict) or not entry.get("url"):
            raise ValueError(f"hpo source: data {data}: download.{role} needs `url:`")
        unknown = set(entry) - DOWNLOAD_KEYS
        if unknown:
            raise ValueError(f"hpo source: data {data}: download.{role}: unknown key(s) {sorted(unknown)}; "
                             f"allowed: {sorted(DOWNLOAD_KEYS)}")
        specs[role] = {"type": "url", **entry}
    return specs


def lock_name(data: str, role: str) -> str:
    """Key of a download in the lock file: per data set, not per registry entry (entries share files)."""
    return f"hpo-{data}" if role == "archive" else f"hpo-{data}-{role}"


def obtain_files(data: str, download: dict[str, dict], *, download_dir: Path, lock_path: Path | None,
                 context: str) -> tuple[dict[str, Path], dict]:
    """Download (or verify the cached copy of) every file of ``data``; return paths and provenance.

    Errors are the url source's (dataset, URL, where to place the file by hand, ``dvc pull``), prefixed
    with ``context`` (the registry entry or objective that needed the file)."""
    from uqcal.data.sources import url as url_source

    paths, provenance = {}, {}
    for role, spec in download.items():
        try:
            path, record = url_source.obtain(spec, name=lock_name(data, role), cache_dir=Path(download_dir),
                                             lock_path=lock_path)
        except DataSourceError as error:
            raise DataSourceError(f"{context} needs the {PAPER_NAMES[data]} download: {error}") from None
        paths[role] = path
        provenance[role] = {k: record[k] for k in ("url", "file", "sha256", "bytes", "downloaded")}
    return paths, provenance


# ---------------------------------------------------------------------------------------- readers
def _strip_header(text: str) -> str:
    return text.partition("\n\n")[2]


def read_20news(path: str | Path) -> dict[str, tuple[list[str], np.ndarray]]:
    """``{"train": (texts, groups), "test": (texts, groups)}`` from the by-date archive, in archive-name
    order; headers stripped, decoded as latin-1 (the corpus is not all UTF-8)."""
    halves: dict[str, list[tuple[str, str, str]]] = {"train": [], "test": []}
    with tarfile.open(path, "r:*") as archive:
        for member in archive:
            if not member.isfile():
                continue
            parts = member.name.strip("/").split("/")
            if len(parts) < 3:
                continue
            match = re.search(r"-(train|test)$", parts[-3])
            if match is None:
                continue
            text = archive.extractfile(member).read().decode("latin-1")
            halves[match.group(1)].append((member.name, parts[-2], _strip_header(text)))
    if not halves["train"] or not halves["test"]:
        raise DataSourceError(f"{path}: not a 20news-bydate archive (needs */*-train/<group>/<doc> and "
                              "*-test/<group>/<doc> files)")
    out = {}
    for half, rows in halves.items():
        rows.sort()
        out[half] = ([r[2] for r in rows], np.array([r[1] for r in rows]))
    return out


_CIFAR_RECORD = 1 + 3 * 32 * 32  # binary version: one label byte, then the red, green and blue 32x32 planes


def _cifar_records(data: bytes, name: str, path) -> tuple[np.ndarray, np.ndarray]:
    if len(data) % _CIFAR_RECORD:
        raise DataSourceError(f"{path}: {name} holds {len(data)} bytes, not a whole number of "
                              f"{_CIFAR_RECORD}-byte CIFAR-10 records")
    records = np.frombuffer(data, dtype=np.uint8).reshape(-1, _CIFAR_RECORD)
    return records[:, 1:].reshape(-1, 3, 32, 32), records[:, 0].astype(np.int64)


def read_cifar10(path: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(X_train, y_train, X_test, y_test) from ``cifar-10-binary.tar.gz`` (the binary version: fixed-size
    records, read with numpy; the python version's pickled batches are never unpickled); X uint8 (N, 3, 32, 32)."""
    batches: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    pickled = False
    with tarfile.open(path, "r:*") as archive:
        for member in archive:
            base = member.name.rsplit("/", 1)[-1]
            if member.isfile() and re.fullmatch(r"data_batch_[1-5]\.bin|test_batch\.bin", base):
                batches[base[:-4]] = _cifar_records(archive.extractfile(member).read(), base, path)
            pickled |= bool(re.fullmatch(r"data_batch_[1-5]|test_batch", base))
    expected = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    missing = [b for b in expected if b not in batches]
    if missing:
        hint = (" It is the python version (pickled batches), which uqcal does not unpickle: download "
                "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz instead.") if pickled else ""
        raise DataSourceError(f"{path}: not the CIFAR-10 binary archive: missing {[m + '.bin' for m in missing]}.{hint}")

    def arrays(names):
        return (np.concatenate([batches[n][0] for n in names]), np.concatenate([batches[n][1] for n in names]))

    return (*arrays(expected[:5]), *arrays(expected[5:]))


def read_svhn(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """(X, y) from an SVHN ``*_32x32.mat``: X uint8 (N, 3, 32, 32), y in 0..9 (the file's label 10 is 0)."""
    from scipy.io import loadmat

    mat = loadmat(path)
    if "X" not in mat or "y" not in mat:
        raise DataSourceError(f"{path}: not an SVHN 32x32 .mat file (needs X and y)")
    X = np.ascontiguousarray(np.asarray(mat["X"], dtype=np.uint8).transpose(3, 2, 0, 1))
    y = np.asarray(mat["y"]).reshape(-1).astype(np.int64)
    y = np.where(y == 10, 0, y)
    if X.shape[1:] != (3, 32, 32) or len(X) != len(y):
        raise DataSourceError(f"{path}: unexpected SVHN shapes X {mat['X'].shape}, y {mat['y'].shape}")
    return X, y


def _subset(n: int, size: int | None, rng_key: list[int]) -> np.ndarray:
    if size is None or size >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng(rng_key).choice(n, size=size, replace=False))


def load_arrays(data: str, paths: dict[str, Path], options: dict):
    """What the scorer of ``data`` trains on (built once per objective, after the files are verified)."""
    seed = options["seed"]
    if data == "20news":
        from sklearn.feature_extraction.text import CountVectorizer

        corpus = read_20news(paths["archive"])
        train_texts, _ = corpus["train"]
        test_texts, _ = corpus["test"]
        train = _subset(len(train_texts), options["train_docs"], [seed, 0])
        test = _subset(len(test_texts), options["test_docs"], [seed, 1])
        vectorizer = CountVectorizer(max_features=options["vocabulary"], stop_words="english")
        X_train = vectorizer.fit_transform([train_texts[i] for i in train])
        X_test = vectorizer.transform([test_texts[i] for i in test])
        return X_train, X_test
    if data == "cifar10":
        X_train, y_train, X_test, y_test = read_cifar10(paths["archive"])
    elif data == "svhn":
        X_train, y_train = read_svhn(paths["train"])
        X_test, y_test = read_svhn(paths["test"])
    else:
        raise ValueError(f"hpo source: {data!r} is not a paper data set")
    train = _subset(len(y_train), options["train_size"], [seed, 0])
    test = _subset(len(y_test), options["test_size"], [seed, 1])
    return X_train[train], y_train[train], X_test[test], y_test[test]


# ---------------------------------------------------------------------------------------- scorers
def lda_perplexity(config: dict, arrays, options: dict) -> float:
    from sklearn.decomposition import LatentDirichletAllocation

    X_train, X_test = arrays
    lda = LatentDirichletAllocation(
        n_components=options["topics"],
        learning_method="online",
        batch_size=int(config["batch_size"]),
        learning_decay=float(config["learning_decay"]),
        learning_offset=float(config["learning_offset"]),
        max_iter=options["max_iter"],
        total_samples=X_train.shape[0],
        random_state=options["seed"],
    ).fit(X_train)
    return float(lda.perplexity(X_test))


def small_cnn(conv_filters: int, fc_units: int, n_classes: int = 10):
    """3 x (conv 3x3 -> ReLU -> max-pool 2) on 32x32x3 inputs, then fc_units -> n_classes."""
    from torch import nn

    layers, channels = [], 3
    for _ in range(3):
        layers += [nn.Conv2d(channels, conv_filters, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]
        channels = conv_filters
    layers += [nn.Flatten(), nn.Linear(conv_filters * 4 * 4, fc_units), nn.ReLU(), nn.Linear(fc_units, n_classes)]
    return nn.Sequential(*layers)


def cnn_test_error(config: dict, arrays, options: dict) -> float:
    import torch
    import torch._dynamo  # noqa: F401  (an optimiser's first step imports it: core/numerics.py)
    import torch.nn.functional as F

    from uqcal.core.device import resolve_device

    X_train, y_train, X_test, y_test = arrays
    device = resolve_device(str(options["device"]))
    seed, batch_size = options["seed"], int(config["batch_size"])
    lr, decay, l2 = float(config["learning_rate"]), float(config["lr_decay"]), float(config["l2"])
    xtr = torch.as_tensor(X_train, device=device)
    ytr = torch.as_tensor(y_train, device=device)
    scaled = X_train.astype(np.float64) / 255.0
    mean = torch.as_tensor(scaled.mean(axis=(0, 2, 3)), dtype=torch.float32, device=device).view(1, 3, 1, 1)
    std = torch.as_tensor(scaled.std(axis=(0, 2, 3)) + 1e-8, dtype=torch.float32, device=device).view(1, 3, 1, 1)

    def prepare(x):
        return (x.float() / 255.0 - mean) / std

    fork = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=fork), torch.backends.cudnn.flags(
        enabled=True, benchmark=False, deterministic=True
    ):
        torch.manual_seed(seed)
        model = small_cnn(int(config["conv_filters"]), int(config["fc_units"])).to(device)
        weights = [p for p in model.parameters() if p.ndim > 1]
        biases = [p for p in model.parameters() if p.ndim <= 1]
        optimiser = torch.optim.SGD([{"params": weights, "weight_decay": 2.0 * l2},
                                     {"params": biases, "weight_decay": 0.0}], lr=lr, momentum=0.9)
        schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, lambda step: 1.0 / (1.0 + decay * step))
        n = len(ytr)
        model.train()
        for epoch in range(options["epochs"]):
            order = torch.as_tensor(np.random.default_rng([seed, epoch]).permutation(n), device=device)
            total = torch.zeros((), device=device)
            for start in range(0, n, batch_size):
                idx = order[start:start + batch_size]
                loss = F.cross_entropy(model(prepare(xtr[idx])), ytr[idx])
                optimiser.zero_grad(set_to_none=True)
                loss.backward()
                optimiser.step()
                schedule.step()
                total = total + loss.detach()
            if not torch.isfinite(total):  # diverged: more epochs cannot help
                break
        model.eval()
        wrong = 0
        with torch.no_grad():
            for start in range(0, len(y_test), 1000):
                xb = prepare(torch.as_tensor(X_test[start:start + 1000], device=device))
                yb = torch.as_tensor(y_test[start:start + 1000], device=device)
                logits = model(xb)
                right = (logits.argmax(dim=1) == yb) & torch.isfinite(logits).all(dim=1)
                wrong += int((~right).sum())
    return wrong / len(y_test)
