"""Datasets bundled with scikit-learn (offline)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from uqcal.data.errors import DataSourceError

ALLOWED_LOADERS = {"load_diabetes", "load_digits", "load_iris", "load_wine", "load_breast_cancer",
                   "load_linnerud"}


def _resize_images(images: np.ndarray, size: int) -> np.ndarray:
    """Bilinear upsampling (scipy.ndimage.zoom, order 1) to size x size, rescaled to 0..255 uint8."""
    from scipy import ndimage

    factor = size / images.shape[1]
    out = np.stack([ndimage.zoom(img, factor, order=1) for img in images.astype(float)])
    out = out[:, :size, :size]
    out = 255.0 * (out - out.min()) / max(out.max() - out.min(), 1e-12)
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def load(spec: dict, *, name: str, cache_dir: Path, seed: int = 0) -> tuple[pd.DataFrame, dict]:
    import sklearn
    import sklearn.datasets as skd

    loader = spec.get("loader")
    if loader not in ALLOWED_LOADERS:
        raise DataSourceError(
            f"dataset {name!r}: sklearn loader {loader!r} is not a bundled (offline) loader; "
            f"use one of {sorted(ALLOWED_LOADERS)}"
        )
    kwargs = {"scaled": spec["scaled"]} if "scaled" in spec else {}
    bunch = getattr(skd, loader)(**kwargs)
    if spec.get("images"):
        if not hasattr(bunch, "images"):
            raise DataSourceError(f"dataset {name!r}: sklearn {loader} has no images")
        size = int(spec.get("image_size", bunch.images.shape[1]))
        pixels = _resize_images(bunch.images, size).reshape(len(bunch.images), -1)
        frame = pd.DataFrame(pixels, columns=[f"px{i}" for i in range(pixels.shape[1])])
        frame.insert(0, "label", [f"digit:{t}" for t in bunch.target])
    else:
        frame = pd.DataFrame(bunch.data, columns=[str(c) for c in bunch.feature_names])
        frame["target"] = bunch.target
    return frame, {"source": "sklearn", "loader": loader, "version": sklearn.__version__, **kwargs}
