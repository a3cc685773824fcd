"""Shared episodic machinery of the fewshot family: meta-training on episodes, prediction, recalibration.

A method subclasses ``EpisodicMethod`` and implements ``build_model``, ``episode_loss`` and
``logit_samples`` (S samples of query logits; S = 1 for deterministic methods). Everything else
(episode sampling, outer Adam with non-finite-gradient skipping, validation checkpoints, the recalibrations,
predictions, the jitter counter) is here so every method sees exactly the same episodes.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch._dynamo  # noqa: F401  (an optimiser's first step imports it; here, before any timer: core/numerics.py)
from torch import nn

from uqcal.core.gp.linalg import JitterCounter
from uqcal.core.predictive import CategoricalPredictive
from uqcal.methods.api import RunContext, load_predictions

from .backbones import BACKBONES
from .base import (
    RECALIBRATED,
    EpisodeArrays,
    EpisodePredictive,
    FewShotClassifier,
    check_episode_shape,
    check_images,
    check_labels,
    episode_labels,
    is_episode_list,
    support_classes,
    validation_checks,
)
from .gp_core import mc_softmax
from .temperature_scaling import Recalibration

# Images one batched backbone pass of validation / test episodes holds: 512 84 x 84 images' first Conv4 feature
# maps (width 64) are ~0.9 GB in float32; at 28 x 28, 5 episodes of 100 images.
BATCH_IMAGES = 512
# Offsets of the runtime's random streams (Runtime.rng / torch_generator): the pipeline's runs have used these
# since before the estimator protocol, so a run's numbers do not depend on which path trained it.
TRAIN_EPISODES, TRAIN_NOISE, TEST_NOISE, RECALIBRATION_NOISE, VALIDATION_NOISE, VALIDATION_EPISODES = 1, 2, 3, 4, 5, 6


@dataclass
class Episode:
    support_x: torch.Tensor  # (N, H, W)
    support_y: torch.Tensor  # (N,) in 0..C-1
    query_x: torch.Tensor
    query_y: torch.Tensor | None  # None when predicting (the labels are what is asked)
    n_way: int


def episode_tensors(X_support, y_support, X_query, y_query, device, n_way: int, image_shape) -> Episode:
    """One episode as tensors on ``device``, labels as positions among the sorted support classes."""
    support_x = check_images("X_support", X_support, image_shape)
    query_x = check_images("X_query", X_query, image_shape)
    support_y = check_labels("y_support", y_support, len(support_x))
    classes = support_classes(support_y, n_way)
    query_index = None
    if y_query is not None:
        query_y = check_labels("y_query", y_query, len(query_x))
        stray = sorted(set(query_y.tolist()) - set(classes.tolist()))
        if stray:
            raise ValueError(f"y_query has classes {stray[:5]} that the support set does not have")
        query_index = torch.as_tensor(np.searchsorted(classes, query_y)).to(device)
    return Episode(
        support_x=torch.as_tensor(support_x).to(device),
        support_y=torch.as_tensor(np.searchsorted(classes, support_y)).to(device),
        query_x=torch.as_tensor(query_x).to(device),
        query_y=query_index,
        n_way=len(classes),
    )


class EpisodicMethod(FewShotClassifier):
    """Meta-train on episodes sampled on the fly from the base classes; predict new episodes.

    Subclasses implement ``build_model``, ``episode_loss`` and ``logit_samples``."""

    defaults = {
        "train_episodes": 400,  # outer iterations (one episode each); the paper: 400-600 epochs x 100
        "lr_backbone": 1e-3,
        "backbone": "auto",
        "width": 64,
        "n_pred_samples": 500,  # MC samples of f* in Eq. 6 (GP methods only)
        "loss_curve_every": 10,  # record the outer loss every this many episodes
        "val_every": 100,  # validate every this many episodes and keep the best (0: keep the last model)
        "n_val_check": 20,  # validation episodes (the first ones) for checkpoint selection
        # checks every `val_every` episodes, or the authors' schedule (base.validation_checks): every this many
        # epochs of `val_every` episodes (0: every epoch) and every epoch in the last `val_dense_epochs`
        "val_sparse_every": 0,
        "val_dense_epochs": 0,
        "recalibrate": True,  # fit the recalibrations on all validation episodes (temperature_scaling.py)
    }
    choices = {"backbone": BACKBONES}
    stochastic_prediction = False
    batch_backbone = False  # see head_model: validation episodes' images through the backbone in batches

    # ---- hooks ---------------------------------------------------------------------------------
    def build_model(self, n_way: int, image_size: int) -> nn.Module:  # pragma: no cover - abstract
        """The method's model, before meta-training.

        Parameters
        ----------
        n_way : int
            The classes of an episode.
        image_size : int
            The images' side in pixels.

        Returns
        -------
        torch.nn.Module
            The untrained model.
        """
        raise NotImplementedError

    def param_groups(self, model: nn.Module) -> list[dict]:
        """The optimiser's parameter groups.

        Parameters
        ----------
        model : torch.nn.Module
            The model ``build_model`` made.

        Returns
        -------
        list of dict
            torch.optim parameter groups (``params`` and ``lr``); by default one group at ``lr_backbone``.
        """
        return [{"params": list(model.parameters()), "lr": self.params["lr_backbone"]}]

    def episode_loss(self, model: nn.Module, episode: Episode, generator: torch.Generator) -> torch.Tensor:
        """The meta-training loss of one episode (minimised by the outer loop).

        Parameters
        ----------
        model : torch.nn.Module
            The model ``build_model`` made.
        episode : Episode
            One episode's tensors (with query labels).
        generator : torch.Generator
            The stream of the method's random draws (MC samples).

        Returns
        -------
        torch.Tensor
            The scalar meta-training loss of the episode.
        """
        raise NotImplementedError  # pragma: no cover - abstract

    def logit_samples(self, model: nn.Module, episode: Episode, generator: torch.Generator) -> torch.Tensor:
        """(S, M, C) samples of query logits; probabilities = mean_s softmax(logits_s / T).

        Parameters
        ----------
        model : torch.nn.Module
            The model ``build_model`` made.
        episode : Episode
            One episode's tensors.
        generator : torch.Generator
            The stream of the method's random draws (MC samples).

        Returns
        -------
        torch.Tensor
            (S, M, C) logit samples of the M queries over the C classes.
        """
        raise NotImplementedError  # pragma: no cover - abstract

    def extra_stats(self, model: nn.Module, validation: Sequence) -> dict:
        """Method-specific statistics of the fitted model.

        Parameters
        ----------
        model : torch.nn.Module
            The meta-trained model.
        validation : sequence
            The validation episodes.

        Returns
        -------
        dict
            Entries added to train_stats.json (none by default).
        """
        return {}

    # ---- the estimator -------------------------------------------------------------------------
    def fit(self, X, y, validation=None, *, n_way: int = 5, k_shot: int = 1, n_query: int = 16,
            n_val_episodes: int = 100) -> EpisodicMethod:
        """Meta-train on ``train_episodes`` N-way K-shot episodes drawn from the pool (X, y).

        X: (n, H, W) float grayscale images of the base classes (the glyph datasets' 28 x 28 pixels in [0, 1]);
        y: (n,) integer class labels (floats are refused). Every episode draws ``n_way`` of the classes,
        ``k_shot`` support and ``n_query`` query images of each (so each class needs k_shot + n_query images),
        from this estimator's random streams (``self.runtime``: its seed).

        validation: None (no validation: the last model is kept and nothing is recalibrated), a pool (X_val,
        y_val) of other classes from which ``n_val_episodes`` episodes of the same shape are drawn, or a
        sequence of episodes (X_support, y_support, X_query, y_query). Every ``val_every`` episodes the mean
        accuracy on the first ``n_val_check`` of them is measured and the best model is kept; with
        ``recalibrate`` the temperatures of temperature_scaling.py are fitted on all of them.
        Returns the fitted estimator; ``self.stats_`` holds the training curves and counters.
        """
        self.check_single_values()
        check_episode_shape(n_way, k_shot, n_query, n_val_episodes)
        images = check_images("X", X)
        labels = check_labels("y", y, len(images))
        classes = np.unique(labels).tolist()
        if len(classes) < n_way:
            raise ValueError(f"y has {len(classes)} classes; {n_way}-way episodes need at least {n_way}")
        self.image_shape_ = tuple(images.shape[1:])
        self.n_way_ = int(n_way)
        episodes = self._validation_episodes(validation, n_way, k_shot, n_query, n_val_episodes)
        self.runtime.seed_everything()
        self.counter = JitterCounter()
        device = self.runtime.device
        model = self.build_model(self.n_way_, int(images.shape[-1])).to(device)
        # The pool stays in host memory; each episode's few images move to the device.
        pool = torch.as_tensor(images, device="cpu")
        rows = {c: np.flatnonzero(labels == c) for c in classes}
        stats = self.meta_train(model, pool, labels, rows, classes, episodes, (n_way, k_shot, n_query))
        self.recalibration_ = None
        if self.params["recalibrate"] and episodes:
            started = time.perf_counter()
            val = self.collect_logits(model, episodes, self.runtime.torch_generator(offset=RECALIBRATION_NOISE))
            fit_started = time.perf_counter()
            self.recalibration_ = Recalibration.fit([s for s, _ in val], [y for _, y in val])
            stats["recalibration_fit_seconds"] = time.perf_counter() - fit_started
            stats["val_prediction_seconds"] = fit_started - started
            stats.update(self.recalibration_.stats())
            stats["n_val_episodes_recalibration"] = len(val)
            for warning in self.recalibration_.warnings():
                self.runtime.log.warning("%s seed %d: %s", self.runtime.name, self.runtime.seed, warning)
        if episodes:
            stats.update(self.extra_stats(model, episodes))
        self.model_, self.stats_ = model, stats
        # One stream for every prediction after fit: successive calls draw fresh Monte Carlo samples, so a
        # pipeline run's test episodes are reproducible from its seed.
        self._prediction_noise = self.runtime.torch_generator(offset=TEST_NOISE)
        self.fitted_ = True
        return self

    def predict(self, X_support, y_support, X_query) -> EpisodePredictive:
        """Class probabilities of the queries of one episode, adapted to its support set.

        X_support: (m, H, W) images of ``n_way`` classes (fit's), with integer labels y_support (m,);
        X_query: (q, H, W). Returns an EpisodePredictive over ``classes`` = the sorted support labels:
        ``probs`` (q, n_way) is Eq. 6a's mean_s softmax(f*_s) for the GP methods (``n_pred_samples``
        draws), softmax(logits) otherwise; ``recalibrated`` holds the recalibrated predictives of the same
        draws when fit recalibrated.
        """
        self.check_fitted()
        episode = episode_tensors(X_support, y_support, X_query, None, self.runtime.device, self.n_way_,
                                  self.image_shape_)
        samples = self.episode_logits(self.model_, episode, self._prediction_noise)
        classes = support_classes(np.asarray(y_support))
        recalibrated = {}
        if self.recalibration_ is not None:
            recalibrated = {prefix: CategoricalPredictive(q, classes)
                            for prefix, q in self.recalibration_.probabilities(samples).items()}
        return EpisodePredictive(mc_softmax(samples).cpu().numpy(), classes, recalibrated)

    # ---- shared loop ---------------------------------------------------------------------------
    def _validation_episodes(self, validation, n_way, k_shot, n_query, n_val_episodes) -> Sequence:
        if validation is None:
            return []
        if len(validation) and not is_episode_list(validation):
            if len(validation) != 2:
                raise ValueError("validation must be a pool (X_val, y_val) or a sequence of episodes "
                                 "(X_support, y_support, X_query, y_query)")
            from uqcal.data.splits import sample_fewshot_episode

            images = check_images("validation X", validation[0], self.image_shape_)
            labels = check_labels("validation y", validation[1], len(images))
            classes = np.unique(labels).tolist()
            rows = {c: np.flatnonzero(labels == c) for c in classes}
            rng = self.runtime.rng(offset=VALIDATION_EPISODES)
            specs = [sample_fewshot_episode(rows, classes, n_way, k_shot, n_query, rng) for _ in range(n_val_episodes)]
            return _EpisodeTensors(EpisodeArrays(images, labels, specs), self)
        if not len(validation):
            raise ValueError("validation has no episodes (give None for no validation)")
        return _EpisodeTensors(validation, self)

    def validate(self, model, episodes: Sequence) -> tuple[float, float]:
        """Mean episode accuracy and pooled ECE of the raw predictive on `episodes`; the same random
        numbers at every check (a fresh generator), so checks differ only by the model."""
        from uqcal.metrics.classification import classification_ece

        generator = self.runtime.torch_generator(offset=VALIDATION_NOISE)
        probs, labels = [], []
        for samples, query_y in self.collect_logits(model, episodes, generator):
            probs.append(mc_softmax(samples))
            labels.append(query_y)
        acc = float(np.mean([float((p.argmax(1) == y).double().mean()) for p, y in zip(probs, labels, strict=True)]))
        ece = classification_ece(torch.cat(probs).double().cpu().numpy(), torch.cat(labels).cpu().numpy())
        return acc, ece

    def meta_train(self, model, pool: torch.Tensor, labels: np.ndarray, rows: dict, classes: list,
                   validation: Sequence, shape: tuple[int, int, int]) -> dict:
        """Adam on the method's episode loss; every `val_every` episodes the validation accuracy, and the
        model with the best one is kept (the authors' best-validation checkpoint, train.py)."""
        from uqcal.data.splits import sample_fewshot_episode

        n_way, k_shot, n_query = shape
        runtime = self.runtime
        rng = runtime.rng(offset=TRAIN_EPISODES)
        generator = runtime.torch_generator(offset=TRAIN_NOISE)
        optimiser = torch.optim.Adam(self.param_groups(model))
        losses, skipped, curve, val_acc, val_ece = [], 0, [], [], []
        val_every = int(self.params["val_every"]) if len(validation) else 0
        val_check = validation[: int(self.params["n_val_check"])]
        checks = set(validation_checks(int(self.params["train_episodes"]), val_every,
                                       int(self.params["val_sparse_every"]), int(self.params["val_dense_epochs"])))
        best = {"acc": -math.inf, "episode": 0, "state": None}
        started = time.perf_counter()
        n_episodes = int(self.params["train_episodes"])
        device = runtime.device
        model.train()
        for step in runtime.progress(range(n_episodes), total=n_episodes, desc=f"{runtime.name} meta-train"):
            spec = sample_fewshot_episode(rows, classes, n_way, k_shot, n_query, rng)
            episode = Episode(
                support_x=pool[spec["support"]].to(device),
                support_y=torch.as_tensor(episode_labels(spec["support"], spec["classes"], labels)).to(device),
                query_x=pool[spec["query"]].to(device),
                query_y=torch.as_tensor(episode_labels(spec["query"], spec["classes"], labels)).to(device),
                n_way=n_way,
            )
            optimiser.zero_grad(set_to_none=True)
            loss = self.episode_loss(model, episode, generator)
            finite = bool(torch.isfinite(loss))
            if finite:
                loss.backward()
                finite = all(bool(torch.all(torch.isfinite(p.grad))) for p in model.parameters() if p.grad is not None)
            if finite:
                optimiser.step()
                losses.append(float(loss.detach()))
            else:
                skipped += 1  # never let a NaN/inf loss or gradient reach the weights; counted
            if step % int(self.params["loss_curve_every"]) == 0 or step == n_episodes - 1:
                window = losses[-int(self.params["loss_curve_every"]) :]
                curve.append([step, float(np.mean(window)) if window else math.nan])
            if step + 1 in checks:
                acc, ece = self.validate(model, val_check)
                val_acc.append([step + 1, acc])
                val_ece.append([step + 1, ece])
                if acc > best["acc"]:
                    best = {"acc": acc, "episode": step + 1, "state": copy.deepcopy(model.state_dict())}
                model.train()
        seconds = time.perf_counter() - started
        if best["state"] is not None:
            model.load_state_dict(best["state"])
        if skipped:
            runtime.log.warning("%s seed %d: %d of %d meta-training steps had a non-finite loss or gradient and "
                                "were skipped", runtime.name, runtime.seed, skipped, n_episodes)
        return {
            "train_seconds": seconds,
            "train_episodes_per_second": n_episodes / max(seconds, 1e-9),
            "nonfinite_steps_skipped": skipped,
            "fit_failures": skipped,
            "final_train_loss": float(np.mean(losses[-20:])) if losses else math.nan,
            "outer_loss_curve": curve,
            "val_acc_curve": val_acc,  # [episode, validation accuracy] at every check
            "val_ece_curve": val_ece,  # [episode, validation ECE of the raw predictive]
            "best_val_episode": best["episode"] if best["state"] is not None else n_episodes,
            "best_val_acc": best["acc"] if best["state"] is not None else math.nan,
        }

    def episode_logits(self, model, episode: Episode, generator) -> torch.Tensor:
        """(S, M, C) logit samples of one episode's queries, on the CPU."""
        model.eval()
        with torch.no_grad():
            return self.logit_samples(model, episode, generator).cpu()

    def head_model(self, model: nn.Module) -> tuple[nn.Module, nn.Module] | None:
        """(the backbone, the model with an identity in its place) where ``batch_backbone``: the method's
        ``logit_samples`` passes an episode's images through ``model.backbone`` only, image by image (batch norm
        in eval mode), so its episodes' features can be computed in one batched pass. None: episode by episode
        (MAML adapts the backbone to each support set, with batch statistics).

        Parameters
        ----------
        model : torch.nn.Module
            The meta-trained model.

        Returns
        -------
        tuple of (torch.nn.Module, torch.nn.Module) or None
            The backbone and the head, or None.
        """
        backbone = getattr(model, "backbone", None) if self.batch_backbone else None
        if backbone is None:
            return None
        head = copy.copy(model)  # a shallow copy shares the kernels' parameters; only the backbone is replaced
        head._modules = {**model._modules, "backbone": nn.Identity()}
        return backbone, head

    def collect_logits(self, model, episodes: Sequence, generator,
                       batch_images: int | None = None) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """(logit samples (S, M, C), query labels) of each episode, in order.

        Where the method allows (``head_model``), the backbone runs on the images of many episodes at once (up
        to ``batch_images`` images, ``BATCH_IMAGES``; 0: episode by episode), then each episode's head (GP fit,
        Monte Carlo draws) runs on its features in the episodes' order, drawing from ``generator`` as the
        per-episode path does: the same numbers up to the backbone's floating-point order
        (tests/methods/test_fewshot_batched.py)."""
        batch_images = BATCH_IMAGES if batch_images is None else batch_images
        split = self.head_model(model) if batch_images > 0 else None
        if split is None:
            return [(self.episode_logits(model, episode, generator), episode.query_y.cpu()) for episode in episodes]
        backbone, head = split
        found, chunk, size = [], [], 0
        for episode in [*episodes, None]:
            n = 0 if episode is None else len(episode.support_x) + len(episode.query_x)
            if chunk and (episode is None or size + n > batch_images):
                found += self._batched_logits(backbone, head, chunk, generator)
                chunk, size = [], 0
            if episode is not None:
                chunk.append(episode)
                size += n
        return found

    def _batched_logits(self, backbone, head, episodes: list[Episode], generator) -> list:
        backbone.eval()
        with torch.no_grad():
            features = backbone(torch.cat([x for e in episodes for x in (e.support_x, e.query_x)]))
        found, start = [], 0
        for episode in episodes:
            n_s, n_q = len(episode.support_x), len(episode.query_x)
            feats = Episode(features[start:start + n_s], episode.support_y, features[start + n_s:start + n_s + n_q],
                            episode.query_y, episode.n_way)
            start += n_s + n_q
            found.append((self.episode_logits(head, feats, generator), episode.query_y.cpu()))
        return found

    # ---- the pipeline --------------------------------------------------------------------------
    def train(self, ctx: RunContext) -> None:
        torch.set_num_threads(int(ctx.config.get("torch_threads", 1) or 1))
        super().train(ctx)

    def run_outputs(self, n_test_episodes: int, test_seconds: float) -> tuple[dict, dict]:
        stats = {**self.stats_, "test_seconds_per_episode": test_seconds / max(1, n_test_episodes),
                 "n_test_episodes": n_test_episodes, "jitter_escalations": self.counter.escalations,
                 "jitter_max": self.counter.max_jitter}
        model = {
            "target": f"{type(self).__module__}:{type(self).__name__}",
            "params": dict(self.params),
            "n_way": self.n_way_,
            "image_size": int(self.image_shape_[-1]),
            "state_dict": self.model_.state_dict(),
        }
        return model, stats

    def evaluate(self, ctx: RunContext, predictions=None) -> dict[str, float]:
        """The family metrics of the raw predictive (acc, nll, ece, mce) and of each recalibration:
        ece_ts (authors' pair chosen by validation ECE), mce_ts (their pair chosen by validation MCE),
        acc_ts / nll_ts (at the ECE pair), and ece_nllts, mce_nllts, nll_nllts (one T by validation NLL)."""
        from uqcal.metrics.classification import classification_metrics

        pred = load_predictions(ctx, predictions)
        metrics = super().evaluate(ctx, pred)
        metrics.setdefault("jitter_escalations", 0.0)  # deterministic methods have no Cholesky at all
        labels = pred["label"].to_numpy(int)
        for prefix in RECALIBRATED:
            cols = sorted((c for c in pred.columns if c.startswith(f"{prefix}_p")), key=lambda c: int(c.split("_p")[1]))
            if not cols:
                continue
            m = classification_metrics(pred[cols].to_numpy(float), labels, n_bins=15)
            if prefix == "tsm":
                metrics["mce_ts"] = m["mce"]
            else:
                for key in (("ece", "nll", "mce") if prefix == "nllts" else ("ece", "nll")):
                    metrics[f"{key}_{prefix}"] = m[key]
                if prefix == "ts":
                    metrics["acc_ts"] = m["accuracy"]
        return metrics


class _EpisodeTensors(Sequence):
    """Validation episodes (X_support, y_support, X_query, y_query) as Episode tensors, built when used."""

    def __init__(self, episodes: Sequence, method: EpisodicMethod):
        self.episodes, self.method = episodes, method

    def __len__(self) -> int:
        return len(self.episodes)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        m = self.method
        return episode_tensors(*self.episodes[i], m.runtime.device, m.n_way_, m.image_shape_)
