"""Heteroscedastic Dropout VI (Gal 2016), with or without quantile regularisation (QR Table 1).

Dropout 0.5 after each hidden layer, kept on at test time; 64 MC passes pooled as a Gaussian mixture.
``dvi`` has lam = 0; ``dvi_qr`` lam = 1 (Sec. 5.2). Authors' code: 64 epochs, batch 512, Adam 1e-2.
"""

from __future__ import annotations

from uqcal.methods.qr.gaussian_nets import GaussianNetMethod


class DropoutVI(GaussianNetMethod):
    """Heteroscedastic MC-dropout net (``lam`` > 0: quantile regularised, QR Eq. 7); parameters as
    ``GaussianNetMethod.defaults`` (``epochs``, ``mc_samples``, ``lam``, ...), ``fit(X, y)`` / ``predict(X)`` ->
    ``GaussianPredictive`` in y's units.

    Parameters
    ----------
    params : dict, optional
        Parameters as one mapping (positional only); keyword arguments add to it.
    **kwargs
        ``GaussianNetMethod.defaults`` keys (``hidden``, ``depth``, ``epochs``, ``lr``, ``dropout``,
        ``mc_samples``, ``n_members``, ``lam``, ``calibration_fraction``, ...), plus ``random_state`` and
        ``device`` as ``Method`` takes them.

    Examples
    --------
    >>> import numpy as np
    >>> from uqcal.methods.qr import DropoutVI
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-2, 2, (64, 1)); y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=64)
    >>> prediction = DropoutVI(epochs=2, mc_samples=4, lam=1.0, random_state=0).fit(X, y).predict_proba(X[:5])
    >>> prediction.mean.shape, bool((prediction.std > 0).all())
    ((5,), True)
    """

    defaults = {**GaussianNetMethod.defaults, "epochs": 64, "dropout": 0.5, "mc_samples": 64,
                "n_members": 1, "adversarial": "none", "lam": 0.0}
