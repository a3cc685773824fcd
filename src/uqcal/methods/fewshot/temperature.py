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

from .common import EpisodeData, check_class_disjoint, mc_softmax, predictions_frame


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
        test = base.collect_logits(model, data, split["test_episodes"], ctx.torch_generator(offset=3))
        probs = [mc_softmax(samples, temperature) for samples, _ in test]
        stats = {
            "temperature": temperature,
            "val_nll_untempered": nll_before,
            "val_nll_tempered": nll_after,
            "jitter_escalations": base.counter.escalations,
        }
        model_obj = {**saved, "temperature": temperature}
        ctx.save_outputs(predictions_frame(probs, [labels for _, labels in test]), model_obj, stats)
