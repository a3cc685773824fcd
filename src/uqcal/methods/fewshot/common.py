"""Shared episodic machinery of the fewshot family: data, meta-training loop, prediction, outputs.

A method subclasses ``EpisodicMethod`` and implements ``build_model``, ``episode_loss`` and
``logit_samples`` (S samples of query logits; S = 1 for deterministic methods). Everything else
(episode sampling, outer Adam with non-finite-gradient skipping, test predictions, the jitter counter)
is here so every method sees exactly the same episodes.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch import nn

from uqcal.api import Method, RunContext
from uqcal.gp.linalg import JitterCounter

from .gp_core import mc_softmax


@dataclass
class Episode:
    support_x: torch.Tensor  # (N, H, W)
    support_y: torch.Tensor  # (N,) in 0..C-1
    query_x: torch.Tensor
    query_y: torch.Tensor
    n_way: int


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


class EpisodeData:
    """Images and labels of one dataset, turned into ``Episode`` tensors on a device."""

    def __init__(self, images: np.ndarray, y: np.ndarray, device: torch.device):
        if images.ndim != 3:
            raise ValueError(f"Table.images must be (n, H, W), got shape {images.shape}")
        if images.shape[0] != len(y):
            raise ValueError(f"{images.shape[0]} images but {len(y)} labels")
        self.images = torch.as_tensor(np.asarray(images, dtype=np.float32))
        self.y = np.asarray([str(v) for v in np.asarray(y).tolist()], dtype=object)  # split classes are str
        self.device = device
        self.image_size = int(images.shape[-1])

    def class_rows(self, classes) -> dict:
        from uqcal.splits import class_rows

        rows = class_rows(self.y.astype(str))
        missing = [c for c in classes if str(c) not in rows]
        if missing:
            raise ValueError(f"classes {missing[:5]} of the split have no rows in the data")
        return {str(c): rows[str(c)] for c in classes}

    def episode(self, spec: dict) -> Episode:
        classes = list(spec["classes"])
        support, query = list(spec["support"]), list(spec["query"])
        if set(support) & set(query):
            raise ValueError("episode support and query share rows")
        to = self.device
        return Episode(
            support_x=self.images[support].to(to),
            support_y=torch.as_tensor(episode_labels(support, classes, self.y)).to(to),
            query_x=self.images[query].to(to),
            query_y=torch.as_tensor(episode_labels(query, classes, self.y)).to(to),
            n_way=len(classes),
        )


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


def predictions_frame(probs_per_episode: list[torch.Tensor], labels_per_episode: list[torch.Tensor]):
    rows = []
    for episode, (probs, labels) in enumerate(zip(probs_per_episode, labels_per_episode, strict=True)):
        p = probs.detach().cpu().numpy().astype(np.float64)
        frame = pd.DataFrame({"episode": episode, "label": labels.cpu().numpy().astype(np.int64)})
        for c in range(p.shape[1]):
            frame[f"p{c}"] = p[:, c]
        rows.append(frame)
    return pd.concat(rows, ignore_index=True)


class EpisodicMethod(Method):
    """Meta-train on episodes sampled on the fly from the train classes; predict the fixed test episodes."""

    defaults = {
        "train_episodes": 400,  # outer iterations (one episode each); the paper: 400-800 epochs x 100
        "lr_backbone": 1e-3,
        "backbone": "auto",
        "width": 64,
        "n_pred_samples": 500,  # MC samples of f* in Eq. 6 (GP methods only)
        "loss_curve_every": 10,  # record the outer loss every this many episodes
    }
    stochastic_prediction = False

    # ---- hooks ---------------------------------------------------------------------------------
    def build_model(self, n_way: int, image_size: int) -> nn.Module:  # pragma: no cover - abstract
        raise NotImplementedError

    def param_groups(self, model: nn.Module) -> list[dict]:
        return [{"params": list(model.parameters()), "lr": self.params["lr_backbone"]}]

    def episode_loss(self, model, episode: Episode, generator: torch.Generator) -> torch.Tensor:
        raise NotImplementedError  # pragma: no cover - abstract

    def logit_samples(self, model, episode: Episode, generator: torch.Generator) -> torch.Tensor:
        """(S, M, C) samples of query logits; probabilities = mean_s softmax(logits_s / T)."""
        raise NotImplementedError  # pragma: no cover - abstract

    def extra_stats(self, model, data: EpisodeData, split: dict, ctx: RunContext) -> dict:
        return {}

    # ---- shared loop ---------------------------------------------------------------------------
    def setup(self, ctx: RunContext):
        torch.set_num_threads(int(ctx.config.get("torch_threads", 1) or 1))
        ctx.seed_everything()
        self.counter = JitterCounter()
        table = ctx.load_data()
        if getattr(table, "images", None) is None:
            raise ValueError(f"dataset {ctx.dataset!r} has no images; fewshot methods need Table.images")
        data = EpisodeData(table.images, table.y, ctx.device)
        split = ctx.load_split()
        check_class_disjoint(split)
        return data, split

    def meta_train(self, model, data: EpisodeData, split: dict, ctx: RunContext) -> dict:
        from uqcal.splits import sample_fewshot_episode

        split_params = ctx.family_params.get("split", {}) or {}
        n_query_train = int(split_params.get("n_query_train", 16))
        n_way, k_shot = int(split["n_way"]), int(split["k_shot"])
        train_classes = [str(c) for c in split["classes"]["train"]]
        class_rows = data.class_rows(train_classes)
        rng = ctx.rng(offset=1)
        generator = ctx.torch_generator(offset=2)
        optimiser = torch.optim.Adam(self.param_groups(model))
        losses, skipped, curve = [], 0, []
        started = time.perf_counter()
        n_episodes = int(self.params["train_episodes"])
        model.train()
        for step in ctx.progress(range(n_episodes), total=n_episodes, desc=f"{ctx.method} meta-train"):
            spec = sample_fewshot_episode(class_rows, train_classes, n_way, k_shot, n_query_train, rng)
            episode = data.episode(spec)
            optimiser.zero_grad(set_to_none=True)
            loss = self.episode_loss(model, episode, generator)
            if not torch.isfinite(loss):
                skipped += 1
                continue
            loss.backward()
            grads = [p.grad for p in model.parameters() if p.grad is not None]
            if any(not torch.all(torch.isfinite(g)) for g in grads):
                skipped += 1  # never let a NaN/inf gradient reach the weights; counted in the metrics
                continue
            optimiser.step()
            losses.append(float(loss.detach()))
            if step % int(self.params["loss_curve_every"]) == 0 or step == n_episodes - 1:
                window = losses[-int(self.params["loss_curve_every"]) :]
                curve.append([step, float(np.mean(window))])
        seconds = time.perf_counter() - started
        return {
            "train_seconds": seconds,
            "train_episodes_per_second": n_episodes / max(seconds, 1e-9),
            "nonfinite_steps_skipped": skipped,
            "final_train_loss": float(np.mean(losses[-20:])) if losses else math.nan,
            "outer_loss_curve": curve,
        }

    def predict_episodes(self, model, data: EpisodeData, episodes: list[dict], generator, temperature=1.0):
        """Probabilities and labels per episode."""
        probs, labels = [], []
        for samples, query_y in self.collect_logits(model, data, episodes, generator):
            probs.append(mc_softmax(samples, temperature))
            labels.append(query_y)
        return probs, labels

    def collect_logits(self, model, data: EpisodeData, episodes: list[dict], generator):
        """(logit samples (S, M, C), query labels) of each episode, one episode after another."""
        model.eval()
        out = []
        with torch.no_grad():
            for spec in episodes:
                episode = data.episode(spec)
                out.append((self.logit_samples(model, episode, generator).cpu(), episode.query_y.cpu()))
        return out

    def train(self, ctx: RunContext) -> None:
        data, split = self.setup(ctx)
        model = self.build_model(int(split["n_way"]), data.image_size).to(ctx.device)
        stats = self.meta_train(model, data, split, ctx)
        started = time.perf_counter()
        probs, labels = self.predict_episodes(model, data, split["test_episodes"], ctx.torch_generator(offset=3))
        stats["test_seconds_per_episode"] = (time.perf_counter() - started) / max(1, len(probs))
        stats.update(self.extra_stats(model, data, split, ctx))
        stats["jitter_escalations"] = self.counter.escalations
        stats["jitter_max"] = self.counter.max_jitter
        model_obj = {
            "target": f"{type(self).__module__}:{type(self).__name__}",
            "params": dict(self.params),
            "n_way": int(split["n_way"]),
            "image_size": data.image_size,
            "state_dict": model.state_dict(),
        }
        ctx.save_outputs(predictions_frame(probs, labels), model_obj, stats)

    def evaluate(self, ctx: RunContext) -> dict[str, float]:
        metrics = super().evaluate(ctx)
        metrics.setdefault("jitter_escalations", 0.0)  # deterministic methods have no Cholesky at all
        return metrics
