"""``torch.optim.Adam`` on CPU, bit for bit, as a handful of foreach calls per step.

torch.optim.Adam takes its single-tensor path on CPU (its foreach path is for CUDA-like devices): per
parameter, ``exp_avg.lerp_``, ``exp_avg_sq.mul_().addcmul_()``, ``sqrt``, a division and ``add_`` for the
denominator, and ``param.addcdiv_``, with Python-float bias corrections from the parameter's own step count.
`ForeachAdam` issues the same per-tensor kernels with the same scalars as ``torch._foreach_*`` calls over all
parameters of a group that have a gradient (scalar lists where the step counts differ), so the parameters
come out bit-identical (tests/test_optim.py). It saves torch.optim's per-step Python work and per-step hooks,
and the ``import torch._dynamo`` the first torch.optim optimizer of a process triggers (2-3 CPU s per job).

`make_adam` returns a ForeachAdam where it reproduces torch exactly (`ForeachAdam.supports`: dense real
float32/float64 CPU tensors, groups of only params and a Python-number lr) and ``torch.optim.Adam``
otherwise (e.g. CUDA tensors). Both have ``zero_grad``, ``step``, ``state_dict`` and ``load_state_dict``; the
state dicts have torch.optim.Adam's layout, so either optimiser loads the other's.
"""

from __future__ import annotations

import torch

BETAS = (0.9, 0.999)
EPS = 1e-8
DEFAULT_LR = 1e-3  # torch.optim.Adam's default

# torch.optim.Adam's param-group hyperparameters other than lr, at the values ForeachAdam implements; written
# into state_dict() so that torch.optim.Adam can load it.
_TORCH_GROUP_DEFAULTS = {
    "betas": BETAS,
    "eps": EPS,
    "weight_decay": 0,
    "amsgrad": False,
    "maximize": False,
    "foreach": None,
    "capturable": False,
    "differentiable": False,
    "fused": None,
    "decoupled_weight_decay": False,
}
# Saved group keys that change the arithmetic: a state dict that sets them otherwise cannot be loaded.
_CHECKED_KEYS = ("betas", "eps", "weight_decay", "amsgrad", "maximize")


def _param_groups(params_or_groups, lr: float | None) -> list[dict]:
    """Normalise an iterable of tensors or of group dicts to a list of groups with their own params lists."""
    if isinstance(params_or_groups, torch.Tensor):
        raise TypeError("params must be an iterable of tensors or of param-group dicts, got a tensor")
    items = list(params_or_groups)
    if not items:
        raise ValueError("optimizer got an empty parameter list")
    if not isinstance(items[0], dict):
        items = [{"params": items}]
    groups = []
    for item in items:
        params = item["params"]
        group = {**item, "params": [params] if isinstance(params, torch.Tensor) else list(params)}
        if "lr" not in group:
            group["lr"] = DEFAULT_LR if lr is None else lr
        groups.append(group)
    seen: set[int] = set()
    for group in groups:
        for p in group["params"]:
            if id(p) in seen:
                raise ValueError("some parameters appear in more than one parameter group")
            seen.add(id(p))
    return groups


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class ForeachAdam:
    """``torch.optim.Adam(params, lr)`` with betas (0.9, 0.999), eps 1e-8, no weight decay, no amsgrad, on
    dense real CPU tensors, bit for bit.

    ``params`` is an iterable of tensors (all with ``lr``) or a list of ``{"params": [...], "lr": float}``
    groups. As in torch, a parameter whose ``.grad`` is None at a step is skipped: it gets no state until
    its first gradient, and its step count (which sets its bias corrections) does not advance.
    """

    betas = BETAS
    eps = EPS

    def __init__(self, params, lr: float | None = None):
        groups = _param_groups(params, lr)
        if not self.supports(groups):
            raise ValueError(
                "ForeachAdam reproduces torch.optim.Adam's CPU path only: dense real float32/float64 CPU "
                "tensors, param groups with only 'params' and a Python-number 'lr' (use make_adam)"
            )
        self.param_groups = [{"params": g["params"], "lr": float(g["lr"])} for g in groups]
        self.state: dict[torch.Tensor, dict] = {}  # param -> {"step": int, "exp_avg", "exp_avg_sq"}

    @staticmethod
    def supports(param_groups) -> bool:
        """Groups of only params and a Python-number lr, on dense real float CPU tensors (torch's
        single-tensor path, which ForeachAdam reproduces)."""
        try:
            groups = list(param_groups)
        except TypeError:
            return False
        return bool(groups) and all(
            isinstance(group, dict)
            and set(group) == {"params", "lr"}
            and _is_number(group["lr"])
            and all(
                isinstance(p, torch.Tensor)
                and p.device.type == "cpu"
                and p.dtype in (torch.float32, torch.float64)
                and p.layout == torch.strided
                for p in ([group["params"]] if isinstance(group["params"], torch.Tensor) else group["params"])
            )
            for group in groups
        )

    def zero_grad(self, set_to_none: bool = True) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:  # torch.optim.Optimizer.zero_grad(set_to_none=False)
                    if p.grad.grad_fn is not None:
                        p.grad.detach_()
                    else:
                        p.grad.requires_grad_(False)
                    p.grad.zero_()

    @torch.no_grad()
    def step(self) -> None:
        beta1, beta2 = self.betas
        for group in self.param_groups:
            params, grads, exp_avgs, exp_avg_sqs, steps = [], [], [], [], []
            for p in group["params"]:
                grad = p.grad
                if grad is None:
                    continue
                if grad.is_sparse:
                    raise RuntimeError("Adam does not support sparse gradients")
                state = self.state.get(p)
                if state is None:
                    zeros = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state = self.state[p] = {"step": 0, "exp_avg": zeros, "exp_avg_sq": zeros.clone()}
                state["step"] += 1
                params.append(p)
                grads.append(grad)
                exp_avgs.append(state["exp_avg"])
                exp_avg_sqs.append(state["exp_avg_sq"])
                steps.append(float(state["step"]))  # torch: its float32 step tensor's .item()
            if not params:
                continue
            lr = group["lr"]
            bias_correction2_sqrts = [(1 - beta2**step) ** 0.5 for step in steps]
            neg_step_sizes = [-(lr / (1 - beta1**step)) for step in steps]
            torch._foreach_lerp_(exp_avgs, grads, 1 - beta1)
            torch._foreach_mul_(exp_avg_sqs, beta2)
            torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1 - beta2)
            denoms = torch._foreach_sqrt(exp_avg_sqs)
            torch._foreach_div_(denoms, bias_correction2_sqrts)
            torch._foreach_add_(denoms, self.eps)
            torch._foreach_addcdiv_(params, exp_avgs, denoms, neg_step_sizes)

    def state_dict(self) -> dict:
        """torch.optim.Adam's layout (params numbered across groups in order, state only for params that
        have it, the step as a float32 tensor), with copies of the moment tensors."""
        index = 0
        groups, state = [], {}
        for group in self.param_groups:
            numbers = []
            for p in group["params"]:
                numbers.append(index)
                s = self.state.get(p)
                if s is not None:
                    state[index] = {
                        "step": torch.tensor(float(s["step"]), dtype=torch.float32),
                        "exp_avg": s["exp_avg"].clone(),
                        "exp_avg_sq": s["exp_avg_sq"].clone(),
                    }
                index += 1
            groups.append({"lr": group["lr"], **_TORCH_GROUP_DEFAULTS, "params": numbers})
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Load a ForeachAdam's or a torch.optim.Adam's (default settings) state dict; as in torch, each
        group's lr comes from the saved group."""
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        for group, saved in zip(self.param_groups, saved_groups, strict=True):
            if len(saved["params"]) != len(group["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                                 "optimizer's group")
            for key in _CHECKED_KEYS:
                if key in saved and saved[key] != _TORCH_GROUP_DEFAULTS[key]:
                    raise ValueError(f"loaded state dict has {key}={saved[key]!r}; ForeachAdam implements "
                                     f"{_TORCH_GROUP_DEFAULTS[key]!r} only")
            if not _is_number(saved["lr"]):
                raise ValueError(f"loaded state dict has a non-number lr {saved['lr']!r}")
        by_number = {
            number: p
            for saved, group in zip(saved_groups, self.param_groups, strict=True)
            for number, p in zip(saved["params"], group["params"], strict=True)
        }
        state = {}
        for number, saved_state in state_dict["state"].items():
            p = by_number[number]
            step = saved_state["step"]
            step = float(step.item()) if isinstance(step, torch.Tensor) else float(step)
            if step != int(step) or step < 1:
                raise ValueError(f"loaded state dict has step {step!r}")
            state[p] = {
                "step": int(step),
                "exp_avg": saved_state["exp_avg"].to(device=p.device, dtype=p.dtype, copy=True),
                "exp_avg_sq": saved_state["exp_avg_sq"].to(device=p.device, dtype=p.dtype, copy=True),
            }
        for group, saved in zip(self.param_groups, saved_groups, strict=True):
            group["lr"] = float(saved["lr"])
        self.state = state


def make_adam(params_or_groups, lr: float | None = None):
    """`ForeachAdam` where it reproduces torch.optim.Adam bit for bit (`ForeachAdam.supports`), else
    ``torch.optim.Adam`` with the same groups (e.g. CUDA tensors). ``lr`` is the learning rate of groups
    that do not set one (torch's default 1e-3 when None)."""
    groups = _param_groups(params_or_groups, lr)
    if ForeachAdam.supports(groups):
        return ForeachAdam(groups)
    return torch.optim.Adam(groups)


__all__ = ["ForeachAdam", "make_adam", "BETAS", "EPS"]
