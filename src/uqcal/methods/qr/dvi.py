"""Heteroscedastic Dropout VI (Gal 2016), with or without quantile regularisation (QR Table 1).

Dropout 0.5 after each hidden layer, kept on at test time; 64 MC passes pooled as a Gaussian mixture.
``dvi`` has lam = 0; ``dvi_qr`` lam = 1 (Sec. 5.2). Authors' code: 64 epochs, batch 512, Adam 1e-2.
"""

from __future__ import annotations

from uqcal.methods.qr.gaussian_nets import GaussianNetMethod


class DropoutVI(GaussianNetMethod):
    defaults = {**GaussianNetMethod.defaults, "epochs": 64, "dropout": 0.5, "mc_samples": 64,
                "n_members": 1, "adversarial": "none", "lam": 0.0}
