"""Deep Ensemble with FGSM adversarial training (Lakshminarayanan et al. 2017), with or without quantile
regularisation (QR Table 2).

5 members, each its own initialisation and minibatch order; loss per member = NLL(x) + NLL(x_adv)
- lam * H(PIT(x)), x_adv = x + eps * sign(grad_x NLL), eps = 0.01 x each feature's training range.
``adversarial: fgsm`` evaluates the net on x_adv (correct); ``fgsm_authors`` reproduces the authors' code,
whose adversarial term reuses the clean outputs (so no adversarial training happens). ``de`` has lam = 0,
``de_qr`` lam = 5 (Sec. 5.2). Authors' code: 48 epochs.
"""

from __future__ import annotations

from uqcal.methods.qr.gaussian_nets import GaussianNetMethod


class DeepEnsemble(GaussianNetMethod):
    defaults = {**GaussianNetMethod.defaults, "epochs": 48, "dropout": 0.0, "mc_samples": 1,
                "n_members": 5, "adversarial": "fgsm", "lam": 0.0}
