"""MD-BFSC (Ke, Cao & Zhou): softmax GP few-shot classifier with mirror-descent inner loop; and `gd`.

`md`: inner loop = mirror descent in natural parameters (Eq. 4), each step a conjugate GP regression;
outer loop = Adam on -ELBO (Eq. 5) back-propagated through the unrolled inner steps.
`gd`: the same model and variational family q_c = N(m_c, L_c L_c^T), inner loop by Euclidean gradient
ascent on the ELBO (the paper's "vanilla" comparison, Sec. 4.3).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn
from torch.nn import functional as F

from .backbones import build_backbone
from .episodic import Episode, EpisodicMethod
from .gp_core import (
    KERNELS,
    SAMPLING,
    ClassKernels,
    dense_elbo,
    dense_moment_elbo,
    gd_posterior_predictive,
    md_elbo,
    predictive_logit_samples,
    run_gradient_descent,
    run_mirror_descent,
    run_moment_gradient_descent,
    site_predictive,
    softmax_expectations_fn,
)

INFERENCE = ("md", "gd")


class DeepKernelGP(nn.Module):
    def __init__(self, backbone: nn.Module, kernels: ClassKernels):
        super().__init__()
        self.backbone = backbone
        self.kernels = kernels


class MirrorDescentGP(EpisodicMethod):
    """MD-BFSC: a softmax-likelihood GP per class over a deep kernel, its posterior fitted on each episode's
    support set by mirror descent (``inference="md"``, Eq. 4) or Euclidean gradient ascent (``"gd"``); the
    query probabilities are Eq. 6a's Monte Carlo average of the softmax. Meta-training maximises the ELBO
    (Eq. 5) through the unrolled inner loop.

    Example (random images stand in for a dataset; fit draws 3-way 1-shot episodes with 4 queries a class)::

        >>> import numpy as np
        >>> from uqcal.methods.fewshot import MirrorDescentGP
        >>> rng = np.random.default_rng(0)
        >>> X, y = rng.random((60, 28, 28)), np.repeat(np.arange(6), 10)  # 6 base classes, 10 images each
        >>> model = MirrorDescentGP(train_episodes=2, width=8, steps_test=5, n_pred_samples=50)
        >>> model = model.fit(X, y, n_way=3, k_shot=1, n_query=4)
        >>> X_support, y_support = rng.random((3, 28, 28)), np.array([10, 11, 12])  # a new episode's classes
        >>> prediction = model.predict(X_support, y_support, rng.random((5, 28, 28)))
        >>> prediction.probs.shape, prediction.classes.tolist()
        ((5, 3), [10, 11, 12])

    Parameters
    ----------
    params : dict, optional
        Parameters as one mapping (positional only); keyword arguments add to it.
    random_state : int, numpy.random.Generator or None, default None
        The seed of the estimator's random streams (episodes, initial weights, MC samples).
    device : str or torch.device, default "cpu"
        Where torch computes.
    **kwargs
        The class's ``defaults`` keys and ``EpisodicMethod.defaults``' keys.
    """
    batch_backbone = True  # logit_samples reads the images through model.backbone only
    defaults = {
        **EpisodicMethod.defaults,
        "inference": "md",  # md | gd
        "kernel": "cosine",  # cosine | rbf | polynomial
        "centre_features": True,  # cosine: centre by the conditioning points' mean (App. E.4); False = authors' code
        "polynomial_power": 2,
        "lr_kernel": 1e-4,
        "sampling": "marginal",  # marginal (per-point class marginals) | full_covariance (authors' code)
        "n_mc_samples": 256,  # MC samples per point marginal for g_m, g_v and the ELBO
        "n_mc_samples_full": 10000,  # joint draws per class when sampling = full_covariance
        "rho_train": 1.0,  # the paper (App. E.3); the authors' code trains with 0.5
        "steps_train": 3,
        "rho_test": 0.5,
        "steps_test": 50,
        "gd_lr_train": 0.05,  # Euclidean step size of `gd` (the paper gives none for training)
        "gd_lr_test": 0.05,
        "n_convergence_episodes": 3,  # inner-loop ELBO curves MD vs GD (Sec. 4.3), on validation episodes
        "convergence_rho": 0.005,
        "convergence_steps": 30,
        "convergence_mc_samples": 2000,
    }
    choices = {**EpisodicMethod.choices, "inference": INFERENCE, "kernel": KERNELS, "sampling": SAMPLING}
    stochastic_prediction = True

    def build_model(self, n_way: int, image_size: int) -> nn.Module:
        backbone = build_backbone(self.params["backbone"], image_size, int(self.params["width"]))
        kernels = ClassKernels(
            self.params["kernel"], n_way, int(self.params["polynomial_power"]), bool(self.params["centre_features"])
        )
        return DeepKernelGP(backbone, kernels)

    def param_groups(self, model: DeepKernelGP) -> list[dict]:
        return [
            {"params": list(model.backbone.parameters()), "lr": self.params["lr_backbone"]},
            {
                "params": [p for p in model.kernels.parameters() if p.requires_grad],
                "lr": self.params["lr_kernel"],
            },
        ]

    # ------------------------------------------------------------------------------ inner loops
    def _expectations(self, onehot, generator):
        full = self.params["sampling"] == "full_covariance"
        n = int(self.params["n_mc_samples_full" if full else "n_mc_samples"])
        return softmax_expectations_fn(onehot, self.params["sampling"], n, self.counter, generator)

    def fit_support(self, kernel: torch.Tensor, onehot: torch.Tensor, steps: int, step_size: float,
                    generator: torch.Generator | None,
                    create_graph: bool) -> tuple[tuple, Callable[[], torch.Tensor]]:
        """Inner loop on the support kernel; returns a fitted state for `predictive` and its ELBO.

        Parameters
        ----------
        kernel : torch.Tensor of shape (C, N, N)
            The class kernels on the support points.
        onehot : torch.Tensor of shape (C, N)
            The support labels, one-hot per class.
        steps : int
            Inner-loop steps.
        step_size : float
            rho of Eq. 4 (MD) or the GD step.
        generator : torch.Generator or None
            The MC samples' stream.
        create_graph : bool
            Keep the graph through the inner loop (``gd`` only).

        Returns
        -------
        tuple of (tuple, callable)
            The fitted state, ``("md", posterior)`` or ``("gd", (kernel_chol, mean, tril))``, and a function that
            evaluates its ELBO (Eq. 9).
        """
        n_mc = int(self.params["n_mc_samples"])
        if self.params["inference"] == "md":
            post = run_mirror_descent(
                kernel, self._expectations(onehot, generator), steps, step_size, self.counter
            )
            return ("md", post), lambda: md_elbo(post, onehot, n_mc, generator)
        kernel_chol, mean, tril = run_gradient_descent(
            kernel, onehot, steps, step_size, n_mc, self.counter, generator, create_graph=create_graph
        )
        return ("gd", (kernel_chol, mean, tril)), lambda: dense_elbo(
            kernel_chol, mean, tril, onehot, n_mc, generator
        )

    def episode_loss(self, model: DeepKernelGP, episode: Episode, generator: torch.Generator) -> torch.Tensor:
        # Training fits the GP to the whole episode (support + 16 queries a class), as DKT/CDKT do.
        images = torch.cat([episode.support_x, episode.query_x])
        labels = torch.cat([episode.support_y, episode.query_y])
        (features,) = model.kernels.prepare(model.backbone(images))
        kernel = model.kernels(features)
        onehot = F.one_hot(labels, episode.n_way).T.to(kernel.dtype)  # (C, N)
        gd = self.params["inference"] == "gd"
        steps = int(self.params["steps_train"])
        step_size = float(self.params["gd_lr_train" if gd else "rho_train"])
        _, elbo = self.fit_support(kernel, onehot, steps, step_size, generator, create_graph=True)
        return -elbo() / labels.numel()

    def _test_inputs(self, model: DeepKernelGP, episode: Episode):
        support, query = model.kernels.prepare(
            model.backbone(episode.support_x), model.backbone(episode.query_x)
        )
        kernel = model.kernels(support)
        k_sq = model.kernels(support, query)
        k_qq = model.kernels(query, diag=True)
        return kernel, k_sq, k_qq

    def logit_samples(self, model: DeepKernelGP, episode: Episode, generator: torch.Generator) -> torch.Tensor:
        kernel, k_sq, k_qq = self._test_inputs(model, episode)
        onehot = F.one_hot(episode.support_y, episode.n_way).T.to(kernel.dtype)
        return self._fit_and_sample(kernel, k_sq, k_qq, onehot, generator)

    def _fit_and_sample(self, kernel, k_sq, k_qq, onehot, generator) -> torch.Tensor:
        """Fit q on the support kernel (C, N, N), sample Eq. 6."""
        gd = self.params["inference"] == "gd"
        steps = int(self.params["steps_test"])
        step_size = float(self.params["gd_lr_test" if gd else "rho_test"])
        with torch.enable_grad() if gd else torch.no_grad():
            (kind, state), _ = self.fit_support(
                kernel, onehot, steps, step_size, generator, create_graph=False
            )
        if kind == "md":
            mu, var = site_predictive(state, k_sq, k_qq)
        else:
            mu, var = gd_posterior_predictive(*[s.detach() for s in state], k_sq, k_qq)
        return predictive_logit_samples(mu, var, int(self.params["n_pred_samples"]), generator)

    # ------------------------------------------------------------------- convergence (Sec. 4.3)
    def elbo_curves(self, kernel: torch.Tensor, onehot: torch.Tensor, seed: int) -> dict[str, list]:
        """ELBO per inner step, fixed kernel, same initial q (the prior), same step size: MD; ``gd``, the
        authors' vanilla GD on (m, Sigma) (their `GradientDescentELBO`; its curve ends early where Sigma
        stops being positive definite); ``gd_whitened``, Euclidean GD in whitened coordinates (ours: a GD
        baseline that stays stable on near-singular kernels).

        Parameters
        ----------
        kernel : torch.Tensor of shape (C, N, N)
            The class kernels on the support points.
        onehot : torch.Tensor of shape (C, N)
            The support labels, one-hot per class.
        seed : int
            The seed of the common random numbers.

        Returns
        -------
        dict of str to list
            ``md``, ``gd`` and ``gd_whitened``: the ELBO after each inner step (step 0 first).
        """
        rho, steps = float(self.params["convergence_rho"]), int(self.params["convergence_steps"])
        n_mc, n_inner = int(self.params["convergence_mc_samples"]), int(self.params["n_mc_samples"])
        curves: dict[str, list] = {"md": [], "gd": [], "gd_whitened": []}

        def common_noise():  # common random numbers: every ELBO evaluation draws the same normals
            return torch.Generator(device="cpu").manual_seed(seed)

        def record_md(_step, post):
            curves["md"].append(float(md_elbo(post, onehot, n_mc, common_noise())))

        def record_gd(_step, kernel_chol, mean, cov_chol):
            if cov_chol is not None:  # None: this step broke Sigma; the curve ends before it
                curves["gd"].append(float(dense_moment_elbo(kernel_chol, mean, cov_chol, onehot, n_mc, common_noise())))

        def record_whitened(_step, kernel_chol, mean, tril):
            with torch.no_grad():
                curves["gd_whitened"].append(float(dense_elbo(kernel_chol, mean, tril, onehot, n_mc, common_noise())))

        gen = torch.Generator(device="cpu").manual_seed(seed + 1)
        with torch.no_grad():
            expectations = softmax_expectations_fn(onehot, "marginal", n_inner, self.counter, gen)
            run_mirror_descent(kernel, expectations, steps, rho, self.counter, callback=record_md)
            gen = torch.Generator(device="cpu").manual_seed(seed + 2)
            run_moment_gradient_descent(kernel, onehot, steps, rho, n_inner, self.counter, gen, callback=record_gd)
        gen = torch.Generator(device="cpu").manual_seed(seed + 2)
        run_gradient_descent(kernel, onehot, steps, rho, n_inner, self.counter, gen, callback=record_whitened)
        return curves

    def inner_loop_curves(self, model: DeepKernelGP, episodes: Sequence[Episode], seed: int) -> dict[str, list]:
        """``elbo_curves`` on each episode's support kernel.

        Parameters
        ----------
        model : DeepKernelGP
            The meta-trained model.
        episodes : sequence of Episode
            The episodes whose support kernels the curves run on.
        seed : int
            The seed of the common random numbers.

        Returns
        -------
        dict of str to list
            ``md``, ``gd`` and ``gd_whitened``: one ELBO curve per episode (``elbo_curves``).
        """
        curves: dict[str, list] = {"md": [], "gd": [], "gd_whitened": []}
        model.eval()
        for episode in episodes:
            with torch.no_grad():
                (features,) = model.kernels.prepare(model.backbone(episode.support_x))
                kernel = model.kernels(features)
            onehot = F.one_hot(episode.support_y, episode.n_way).T.to(kernel.dtype)
            for name, curve in self.elbo_curves(kernel, onehot, seed).items():
                curves[name].append(curve)
        return curves

    def extra_stats(self, model: DeepKernelGP, validation: Sequence[Episode]) -> dict:
        """Sec. 4.3's inner-loop ELBO curves (MD against GD) on the first ``n_convergence_episodes`` validation
        episodes.

        Parameters
        ----------
        model : DeepKernelGP
            The meta-trained model.
        validation : sequence of Episode
            The validation episodes.

        Returns
        -------
        dict
            ``inner_elbo_curves`` (``inner_loop_curves``), or empty with ``inference="gd"`` or no convergence episodes.
        """
        if self.params["inference"] != "md" or int(self.params["n_convergence_episodes"]) <= 0:
            return {}
        episodes = validation[: int(self.params["n_convergence_episodes"])]
        return {"inner_elbo_curves": self.inner_loop_curves(model, episodes, seed=self.runtime.seed)}
