"""Shared episodic machinery of the fewshot family: data, meta-training loop, prediction, outputs.

A method subclasses ``EpisodicMethod`` and implements ``build_model``, ``episode_loss`` and
``logit_samples`` (S samples of query logits; S = 1 for deterministic methods). Everything else
(episode sampling, outer Adam with non-finite-gradient skipping, test predictions, the jitter counter)
is here so every method sees exactly the same episodes.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch import nn

from uqcal.core.gp.linalg import JitterCounter
from uqcal.methods.api import Method, RunContext, load_predictions

from .gp_core import mc_softmax
from .temperature_scaling import Recalibration


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
        # The dataset stays in host memory; ``episode`` moves each episode's few images to the device.
        self.images = torch.as_tensor(np.asarray(images, dtype=np.float32), device="cpu")
        self.y = np.asarray([str(v) for v in np.asarray(y).tolist()], dtype=object)  # split classes are str
        self.device = device
        self.image_size = int(images.shape[-1])

    def class_rows(self, classes) -> dict:
        from uqcal.data.splits import class_rows

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


RECALIBRATED = ("ts", "tsm", "nllts")  # column prefixes: authors' pair by val ECE / by val MCE; one T by NLL


def predictions_frame(probs_per_episode, labels_per_episode, recalibrated=None) -> pd.DataFrame:
    """episode, label, p0..p{C-1} (the model's predictive), and per recalibration `<prefix>_p0..`."""
    rows = []
    for episode, (probs, labels) in enumerate(zip(probs_per_episode, labels_per_episode, strict=True)):
        p = np.asarray(probs.detach().cpu().numpy() if torch.is_tensor(probs) else probs, dtype=np.float64)
        frame = pd.DataFrame({"episode": episode, "label": labels.cpu().numpy().astype(np.int64)})
        for c in range(p.shape[1]):
            frame[f"p{c}"] = p[:, c]
        for prefix, q in (recalibrated[episode] if recalibrated else {}).items():
            for c in range(q.shape[1]):
                frame[f"{prefix}_p{c}"] = q[:, c]
        rows.append(frame)
    return pd.concat(rows, ignore_index=True)


def per_run_params(params: dict, dataset: str, setting: str) -> dict:
    """A parameter given as a mapping {dataset or setting name: value} takes this run's value (e.g. the
    paper's kernel per dataset, or its 40k / 60k training episodes per setting)."""
    out = dict(params)
    for key, value in params.items():
        if isinstance(value, dict):
            hits = [value[k] for k in (dataset, setting) if k in value]
            if len(hits) != 1:
                raise ValueError(
                    f"parameter {key!r} = {value!r} must name exactly one of this run's dataset {dataset!r} "
                    f"or setting {setting!r}"
                )
            out[key] = hits[0]
    return out


class EpisodicMethod(Method):
    """Meta-train on episodes sampled on the fly from the train classes; predict the fixed test episodes."""

    run_mappings = True  # a parameter may be {dataset or setting: value} (per_run_params)
    defaults = {
        "train_episodes": 400,  # outer iterations (one episode each); the paper: 400-600 epochs x 100
        "lr_backbone": 1e-3,
        "backbone": "auto",
        "width": 64,
        "n_pred_samples": 500,  # MC samples of f* in Eq. 6 (GP methods only)
        "loss_curve_every": 10,  # record the outer loss every this many episodes
        "val_every": 100,  # validate every this many episodes and keep the best (0: keep the last model)
        "n_val_check": 20,  # validation episodes (the split's first ones) for checkpoint selection
        "recalibrate": True,  # fit the recalibrations on all validation episodes (temperature_scaling.py)
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
        self.params = per_run_params(self.params, ctx.dataset, ctx.setting)
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

    def validate(self, model, data: EpisodeData, episodes: list[dict], ctx: RunContext) -> tuple[float, float]:
        """Mean episode accuracy and pooled ECE of the raw predictive on `episodes`; the same random
        numbers at every check (a fresh generator), so checks differ only by the model."""
        from uqcal.metrics.classification import classification_ece

        probs, labels = self.predict_episodes(model, data, episodes, ctx.torch_generator(offset=5))
        acc = float(np.mean([float((p.argmax(1) == y).double().mean()) for p, y in zip(probs, labels, strict=True)]))
        ece = classification_ece(torch.cat(probs).double().cpu().numpy(), torch.cat(labels).cpu().numpy())
        return acc, ece

    def meta_train(self, model, data: EpisodeData, split: dict, ctx: RunContext) -> dict:
        """Adam on the method's episode loss; every `val_every` episodes the validation accuracy, and the
        model with the best one is kept (the authors' best-validation checkpoint, train.py)."""
        from uqcal.data.splits import sample_fewshot_episode

        split_params = ctx.family_params.get("split", {}) or {}
        n_query_train = int(split_params.get("n_query_train", 16))
        n_way, k_shot = int(split["n_way"]), int(split["k_shot"])
        train_classes = [str(c) for c in split["classes"]["train"]]
        class_rows = data.class_rows(train_classes)
        rng = ctx.rng(offset=1)
        generator = ctx.torch_generator(offset=2)
        optimiser = torch.optim.Adam(self.param_groups(model))
        losses, skipped, curve, val_acc, val_ece = [], 0, [], [], []
        val_every = int(self.params["val_every"])
        val_specs = split["val_episodes"][: int(self.params["n_val_check"])]
        if val_every > 0 and not val_specs:
            raise ValueError(f"{ctx.method}: val_every = {val_every} needs validation episodes in the split")
        best = {"acc": -math.inf, "episode": 0, "state": None}
        started = time.perf_counter()
        n_episodes = int(self.params["train_episodes"])
        model.train()
        for step in ctx.progress(range(n_episodes), total=n_episodes, desc=f"{ctx.method} meta-train"):
            spec = sample_fewshot_episode(class_rows, train_classes, n_way, k_shot, n_query_train, rng)
            episode = data.episode(spec)
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
            if val_every > 0 and ((step + 1) % val_every == 0 or step == n_episodes - 1):
                acc, ece = self.validate(model, data, val_specs, ctx)
                val_acc.append([step + 1, acc])
                val_ece.append([step + 1, ece])
                if acc > best["acc"]:
                    best = {"acc": acc, "episode": step + 1, "state": copy.deepcopy(model.state_dict())}
                model.train()
        seconds = time.perf_counter() - started
        if best["state"] is not None:
            model.load_state_dict(best["state"])
        if skipped:
            ctx.log.warning("%s seed %d: %d of %d meta-training steps had a non-finite loss or gradient and were "
                            "skipped", ctx.method, ctx.seed, skipped, n_episodes)
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
        test = self.collect_logits(model, data, split["test_episodes"], ctx.torch_generator(offset=3))
        stats["test_seconds_per_episode"] = (time.perf_counter() - started) / max(1, len(test))
        probs = [mc_softmax(samples) for samples, _ in test]
        labels = [y for _, y in test]
        recalibrated = None
        if self.params["recalibrate"]:
            started = time.perf_counter()
            val = self.collect_logits(model, data, split["val_episodes"], ctx.torch_generator(offset=4))
            fit_started = time.perf_counter()
            recal = Recalibration.fit([s for s, _ in val], [y for _, y in val])
            stats["recalibration_fit_seconds"] = time.perf_counter() - fit_started
            stats["val_prediction_seconds"] = fit_started - started
            recalibrated = [recal.probabilities(samples) for samples, _ in test]
            stats.update(recal.stats())
            stats["n_val_episodes_recalibration"] = len(val)
            for warning in recal.warnings():
                ctx.log.warning("%s seed %d: %s", ctx.method, ctx.seed, warning)
        stats.update(self.extra_stats(model, data, split, ctx))
        stats["n_test_episodes"] = len(test)
        stats["jitter_escalations"] = self.counter.escalations
        stats["jitter_max"] = self.counter.max_jitter
        model_obj = {
            "target": f"{type(self).__module__}:{type(self).__name__}",
            "params": dict(self.params),
            "n_way": int(split["n_way"]),
            "image_size": data.image_size,
            "state_dict": model.state_dict(),
        }
        ctx.save_outputs(predictions_frame(probs, labels, recalibrated), model_obj, stats)

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
