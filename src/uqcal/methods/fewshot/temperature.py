"""Temperature scaling (Guo et al. 2017) of a trained fewshot model, tuned on the validation episodes.

A `*_ts` entry depends on its base method: it reloads the base's model.pt, fits one temperature T by
minimising the validation NLL of p = mean_s softmax(f_s / T) (MC logit samples for GP methods, one
deterministic logit vector otherwise), then predicts the same test episodes with T. As in the authors'
code the temperature is tuned on validation tasks, never on test tasks.
"""

from __future__ import annotations

import importlib
import math

import torch
from scipy.optimize import minimize_scalar

from uqcal.api import Method, RunContext
from uqcal.gp.linalg import JitterCounter

from .common import EpisodeData, check_class_disjoint, episodes_digest, mc_softmax, predictions_frame


def fit_temperature(logits_and_labels, t_min: float, t_max: float) -> tuple[float, float, float]:
    """Returns (T, val NLL at T = 1, val NLL at T)."""

    def nll(log_t: float) -> float:
        total, count = 0.0, 0
        for samples, labels in logits_and_labels:
            probs = mc_softmax(samples, math.exp(log_t)).clamp_min(1e-12)
            total -= float(probs.log().gather(1, labels.view(-1, 1)).sum())
            count += labels.numel()
        return total / count

    result = minimize_scalar(nll, bounds=(math.log(t_min), math.log(t_max)), method="bounded")
    return math.exp(result.x), nll(0.0), float(result.fun)


def reused_test_logits(base, saved: dict, split: dict, generator):
    """The test episodes' logit samples from the base run's kept ``query_outputs``, or None.

    Identical to ``base.collect_logits`` on the test episodes: the outputs are what the same model computes
    on the same episodes, and only ``draw_logits`` consumes the generator, in the same episode order. The
    base run's test-time jitter escalations are added to ``base.counter`` as if they had happened here.
    """
    kept = saved.get("test_outputs")
    if not base.reusable_test_outputs or kept is None:
        return None
    if kept["episodes"] != episodes_digest(split["test_episodes"]):
        return None  # the base run predicted other test episodes: recompute
    base.counter.escalations += int(kept["jitter_escalations"])
    return [
        (base.draw_logits(outputs, generator).cpu(), labels.cpu())
        for outputs, labels in zip(kept["outputs"], kept["labels"], strict=True)
    ]


class TemperatureScaled(Method):
    defaults = {"t_min": 0.02, "t_max": 50.0}

    def train(self, ctx: RunContext) -> None:
        if ctx.depends_dir is None:
            raise ValueError(f"{ctx.method}: temperature scaling needs `depends_on` (the base method's run)")
        torch.set_num_threads(int(ctx.config.get("torch_threads", 1) or 1))
        saved = torch.load(ctx.depends_dir / "model.pt", map_location=ctx.device, weights_only=False)
        module_name, _, class_name = saved["target"].partition(":")
        base = getattr(importlib.import_module(module_name), class_name)(saved["params"])
        base.counter = JitterCounter()
        model = base.build_model(saved["n_way"], saved["image_size"]).to(ctx.device)
        model.load_state_dict(saved["state_dict"])
        table = ctx.load_data()
        data = EpisodeData(table.images, table.y, ctx.device)
        split = ctx.load_split()
        check_class_disjoint(split)
        val = base.collect_logits(model, data, split["val_episodes"], ctx.torch_generator(offset=4))
        temperature, nll_before, nll_after = fit_temperature(
            val, float(self.params["t_min"]), float(self.params["t_max"])
        )
        test = reused_test_logits(base, saved, split, ctx.torch_generator(offset=3))
        if test is None:
            test = base.collect_logits(model, data, split["test_episodes"], ctx.torch_generator(offset=3))
        probs = [mc_softmax(samples, temperature) for samples, _ in test]
        stats = {
            "temperature": temperature,
            "val_nll_untempered": nll_before,
            "val_nll_tempered": nll_after,
            "jitter_escalations": base.counter.escalations,
        }
        model_obj = {**{k: v for k, v in saved.items() if k != "test_outputs"}, "temperature": temperature}
        ctx.save_outputs(predictions_frame(probs, [labels for _, labels in test]), model_obj, stats)
