"""Deep Ensemble (Lakshminarayanan et al. 2017), with or without quantile regularisation (QR Table 2).

5 members, each its own initialisation and minibatch order, 64 epochs (the authors' notebook passes
epochs=64 to both models). ``adversarial`` (gaussian_nets.minibatch_loss):

- ``fgsm_authors`` (default, methods ``de``/``de_qr``): the authors' step exactly, gradient
  2 grad NLL + (lam / 2) grad(-H): their FGSM leaves no trace (the adversarial loss reuses the clean
  outputs) and their ``perturb()`` leaks a second grad NLL into the step, so lam = 5 weighs the entropy
  like lam = 1.25 on one NLL.
- ``fgsm`` (the paper as written, methods ``de_paper``/``de_qr_paper``): NLL(x) + NLL(x_adv) - lam H,
  x_adv = x + eps sign(grad_x NLL), eps = 0.01 x each feature's training range.
``de`` has lam = 0, ``de_qr`` lam = 5 (Sec. 5.2).
"""

from __future__ import annotations

from uqcal.methods.qr.gaussian_nets import GaussianNetMethod


class DeepEnsemble(GaussianNetMethod):
    """``n_members`` heteroscedastic nets pooled as one Gaussian (``lam`` > 0: quantile regularised); parameters
    as ``GaussianNetMethod.defaults``, ``fit(X, y)`` / ``predict(X)`` -> ``GaussianPredictive`` in y's units.

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
    >>> from uqcal.methods.qr import DeepEnsemble
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-2, 2, (64, 1)); y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=64)
    >>> prediction = DeepEnsemble(epochs=2, n_members=2, random_state=0).fit(X, y).predict_proba(X[:5])
    >>> prediction.mean.shape, bool((prediction.std > 0).all())
    ((5,), True)
    """

    defaults = {**GaussianNetMethod.defaults, "epochs": 64, "dropout": 0.0, "mc_samples": 1,
                "n_members": 5, "adversarial": "fgsm_authors", "lam": 0.0}
