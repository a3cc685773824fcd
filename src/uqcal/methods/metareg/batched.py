"""A job's seeds meta-trained as one batched model (issue 53): ``meta_train`` for K seeds at once.

Each seed keeps its own model, data, episode stream and early stopping; their parameters are stacked
(torch.func.stack_module_state) and every training step evaluates all seeds' losses with torch.func.vmap over
torch.func.functional_call. The summed loss gives each seed exactly its own gradient, and Adam (elementwise)
then updates each seed's slice as a per-seed Adam would. A seed that stops (early stopping, a non-finite loss)
leaves the batch: its best state is kept, and its slices of the parameters and of Adam's moments are dropped,
so the others go on unchanged. Validation runs per seed on its own slice, with the per-seed path's operations.

What differs from the per-seed path is only the order of floating-point reductions inside the batched
kernels (a batched matmul instead of one matmul per seed), so a seed's numbers equal its own run's up to
rounding amplified by training; each method that opts in states its tolerance.
"""

from __future__ import annotations

import copy
import logging
import math
import time

import torch
import torch._dynamo  # noqa: F401  (an optimiser's first step imports it; here, before any timer: core/numerics.py)
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

from uqcal.methods.api import RunContext
from uqcal.methods.metareg.episodes import EpisodeData, Episodes, early_stopping


class _EpisodeLoss(nn.Module):
    """``loss_fn(model, episodes)`` as a module, so functional_call can run it on one seed's parameters."""

    def __init__(self, model: nn.Module, loss_fn):
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn

    def forward(self, xs, ys, xq, yq):
        return self.loss_fn(self.model, Episodes(xs, ys, xq, yq))


def _stack(episodes: list[Episodes]) -> tuple[torch.Tensor, ...]:
    return tuple(torch.stack([getattr(e, name) for e in episodes]) for name in ("xs", "ys", "xq", "yq"))


def vmapped_seed_losses(template: nn.Module, loss_fn):
    """The default ``seed_losses``: ``loss_fn`` of every seed, torch.func.vmap over functional_call of the
    template (a model on the meta device) with each seed's slice of the stacked parameters."""
    wrapper = _EpisodeLoss(template, loss_fn)

    def seed_loss(seed_params, seed_buffers, xs, ys, xq, yq):
        return functional_call(wrapper, ({f"model.{n}": v for n, v in seed_params.items()},
                                         {f"model.{n}": v for n, v in seed_buffers.items()}), (xs, ys, xq, yq))

    batched = vmap(seed_loss)

    def seed_losses(stacked: dict, buffers: dict, episodes: list[Episodes]) -> torch.Tensor:
        return batched(stacked, buffers, *_stack(episodes))

    return seed_losses


def meta_train_batch(models: list[nn.Module], loss_fn, datas: list[EpisodeData], params: dict,
                     generators: list[torch.Generator], log: logging.Logger | None = None,
                     names: list[str] | None = None, seed_losses=None, progress=None,
                     global_streams: list[torch.Generator] | None = None) -> list[dict]:
    """``meta_train`` (same schedule, stopping rule and statistics) for K seeds at once; ``models`` are loaded
    with each seed's final (best) state. The seeds' data must agree in the number of meta-training tasks,
    N_S, N_Q and features (``_batchable``). No mid-training checkpoints (the batch is one short job).
    ``seed_losses(template)``: makes the function of (stacked parameters, stacked buffers, one Episodes per
    seed) -> each seed's loss (K,); None: ``vmapped_seed_losses``. ``progress(iterable, total, desc)``: reports
    the epochs (a Runtime's), or None. ``global_streams``: for a loss that draws from torch's global generator
    (dropout), each seed's copy of it; the training loss function is then called with ``streams=`` the stepping
    seeds' copies (it draws each seed's numbers from its own), and each seed validates with its copy swapped in.

    Returns
    -------
    list of dict
        Each seed's training statistics, as ``meta_train`` returns them (``train_seconds``: the batch's time
        shared equally).
    """
    k = len(models)
    log = log or logging.getLogger(__name__)
    names = names or [f"seed {i}" for i in range(k)]
    first = datas[0]
    n_tasks = len(first.train_tasks)
    batch = min(params["batch_tasks"], n_tasks)
    template = copy.deepcopy(models[0]).to("meta")
    batched_loss = (seed_losses or (lambda t: vmapped_seed_losses(t, loss_fn)))(template)
    validator = _EpisodeLoss(template, loss_fn)

    def seed_loss(seed_params, seed_buffers, episodes: Episodes):  # one seed's loss, the per-seed path's ops
        return functional_call(validator, ({f"model.{n}": v for n, v in seed_params.items()},
                                           {f"model.{n}": v for n, v in seed_buffers.items()}),
                               (episodes.xs, episodes.ys, episodes.xq, episodes.yq))

    stacked, buffers = stack_module_state(models)  # leaves (K, ...), each seed's slice its model's tensors
    optimiser = torch.optim.Adam(stacked.values(), lr=params["lr"])
    stoppers = [early_stopping(params) for _ in models]
    for stopper, model in zip(stoppers, models, strict=True):
        stopper.best_state = copy.deepcopy(model.state_dict())
    steps, epochs_run, failures = [0] * k, [0] * k, [0] * k
    last_state: list[dict | None] = [None] * k
    active = list(range(k))  # the seeds still training, in the order of the stacked slices
    start = time.perf_counter()

    def seed_state(slot: int) -> dict:
        tensors = {**{n: v[slot] for n, v in stacked.items()}, **{n: v[slot] for n, v in buffers.items()}}
        return {n: tensors[n].detach().clone() for n in models[0].state_dict()}

    def keep_only(slots: list[int]) -> None:
        """Drop the finished seeds' slices from the parameters and Adam's state (per-seed Adam is elementwise)."""
        nonlocal stacked, buffers, optimiser
        index = torch.tensor(slots, device=first.device)
        new = {n: v.detach()[index].clone().requires_grad_(True) for n, v in stacked.items()}
        new_optimiser = torch.optim.Adam(new.values(), lr=params["lr"])
        for name, old in stacked.items():
            state = optimiser.state.get(old)
            if state:
                new_optimiser.state[new[name]] = {key: value if key == "step" else value[index].clone()
                                                  for key, value in state.items()}
        stacked, optimiser = new, new_optimiser
        buffers = {n: v[index] for n, v in buffers.items()}

    epochs = range(params["epochs"])
    for epoch in progress(epochs, total=len(epochs), desc=f"meta-train {k} seeds") if progress else epochs:
        if not active:
            break
        template.train()
        orders = [torch.randperm(n_tasks, generator=generators[i]).to(first.device) for i in active]
        broken: set[int] = set()  # seeds whose loss went non-finite in this epoch: they step no more
        for lo in range(0, n_tasks - batch + 1, batch):  # drop the ragged last batch
            slots = [s for s, i in enumerate(active) if i not in broken]
            if not slots:
                break
            episodes = [datas[active[s]].sample(orders[s][lo : lo + batch], first.n_support, first.n_query,
                                                generators[active[s]]) for s in slots]
            optimiser.zero_grad()
            streams = {} if global_streams is None else {"streams": [global_streams[active[s]] for s in slots]}
            losses = batched_loss(*_subset(stacked, buffers, slots, len(active)), episodes, **streams)
            finite = torch.isfinite(losses)
            for s, ok in zip(slots, finite.tolist(), strict=True):
                if not ok:  # as meta_train: never step on a broken loss; the best state is restored below
                    failures[active[s]] += 1
                    broken.add(active[s])
            if not finite.any():
                continue
            losses[finite].sum().backward()
            optimiser.step()  # a broken seed's slice moves too, but it is dropped below and its best state kept
            for s, ok in zip(slots, finite.tolist(), strict=True):
                if ok:
                    steps[active[s]] += 1
        still = []
        for slot, i in enumerate(active):
            epochs_run[i] = epoch + 1
            stopped = i in broken
            data = datas[i]
            if not stopped and data.val is not None and (stoppers[i].due(steps[i]) or epoch + 1 == params["epochs"]):
                template.eval()
                # The slot's parameters as leaves, as a per-seed model's: a loss that differentiates inside
                # (MAML's inner loop, under enable_grad) needs them to require grad under no_grad too.
                val_params = {n: v.detach()[slot].requires_grad_(True) for n, v in stacked.items()}
                if global_streams is not None:  # the seed's own draws, as alone
                    torch.set_rng_state(global_streams[i].get_state())
                with torch.no_grad():
                    val_buffers = {n: v[slot] for n, v in buffers.items()}
                    val = float(seed_loss(val_params, val_buffers, data.val))
                if global_streams is not None:
                    global_streams[i].set_state(torch.get_rng_state())
                if math.isfinite(val):
                    stopped = stoppers[i].update(steps[i], val, seed_state(slot))
                else:
                    failures[i], stopped = failures[i] + 1, True
            if stopped:
                last_state[i] = seed_state(slot)
            else:
                still.append(slot)
        if len(still) < len(active):
            if still:
                keep_only(still)
            active = [active[s] for s in still]
    for slot, i in enumerate(active):  # every epoch ran
        last_state[i] = seed_state(slot)
    seconds = (time.perf_counter() - start) / k
    results = []
    for i, model in enumerate(models):
        if failures[i]:
            log.warning("%s: non-finite loss at step %d; training stopped, the best state (step %d) restored",
                        names[i], steps[i], stoppers[i].best_step)
        model.load_state_dict(stoppers[i].best_state if datas[i].val is not None or failures[i] else last_state[i])
        model.eval()
        results.append({
            "fit_failures": failures[i],
            "train_seconds": seconds,
            "epochs_run": epochs_run[i],
            "steps_run": steps[i],
            "best_step": stoppers[i].best_step,
            "best_val_loss": stoppers[i].best,
            "val_curve": stoppers[i].curve,
        })
    return results


def _subset(stacked: dict, buffers: dict, slots: list[int], n_active: int) -> tuple[dict, dict]:
    if len(slots) == n_active:
        return stacked, buffers
    index = torch.tensor(slots, device=next(iter(stacked.values())).device)
    return {n: v[index] for n, v in stacked.items()}, {n: v[index] for n, v in buffers.items()}


class SeedBatchedTraining:
    """Mixin for an ``EpisodicMetaMethod`` whose ``episode_losses`` vmap over seeds (no data-dependent Python
    control flow on tensors, no random draws in training): ``train_batch(ctxs)`` meta-trains a job's seeds as
    one batched model (``meta_train_batch``) and saves each seed's outputs as ``train(ctx)`` does, or returns
    False where they do not batch."""

    seed_losses = None  # a method's own ``seed_losses(template)`` for meta_train_batch; None: vmapped
    global_stream = False  # True: training draws from torch's global generator (dropout); each seed gets its copy

    def seed_batchable(self) -> bool:
        """Whether this configuration's seeds train batched (a method whose training amplifies rounding to
        visible differences says False: its seeds then train one after another, as ``train`` does)."""
        return True

    def batches_on(self, device: torch.device) -> bool:
        """Whether the seeds train batched on ``device`` (else one after another). A global-stream method on a
        GPU draws from the device's generator, which the seeds' CPU copies do not follow."""
        return not self.global_stream or device.type == "cpu"

    @property
    def train_batch(self):
        """``train_batch(ctxs)`` where ``seed_batchable``, else None: the pipeline then trains the seeds one by one
        (uqcal.pipeline.steps.train), each kept for a resumed run as soon as it is done."""
        return self._train_batch if self.seed_batchable() else None

    def _train_batch(self, ctxs: list[RunContext]) -> bool:
        """True: every seed meta-trained as one model and saved; False (nothing saved): seeds whose parameters,
        episode shapes or schedules differ, or a device ``batches_on`` refuses, which the pipeline trains one by
        one."""
        torch.set_num_threads(int(ctxs[0].config.get("torch_threads", 1) or 1))
        runs = []
        for ctx in ctxs:  # each seed's draws before training, in fit's order: data, generator, initial weights
            self.runtime, self.checkpoint = ctx.runtime, None
            arrays = self._run_arrays(ctx)
            data, generator = self._fit_data(arrays["tasks"], arrays["validation"], arrays["n_support"],
                                              arrays["n_query"])
            model = self.build(data).to(device=data.device, dtype=data.dtype)
            stream = torch.Generator(device="cpu").set_state(torch.get_rng_state()) if self.global_stream else None
            runs.append((ctx, arrays, data, generator, model, stream))
        if not _batchable(ctxs, [r[2] for r in runs]) or not self.batches_on(runs[0][2].device):
            return False  # the pipeline trains them one by one
        stats = meta_train_batch([r[4] for r in runs], self.loss, [r[2] for r in runs], self.params,
                                 [r[3] for r in runs], ctxs[0].log, [f"{ctx.method} seed {ctx.seed}" for ctx in ctxs],
                                 self.seed_losses, ctxs[0].runtime.progress,
                                 [r[5] for r in runs] if self.global_stream else None)
        for (ctx, arrays, data, _, model, stream), seed_stats in zip(runs, stats, strict=True):
            self.runtime = ctx.runtime
            if stream is not None:  # prediction's draws (MC dropout) go on from the seed's training draws, as alone
                torch.set_rng_state(stream.get_state())
            self.data_, self.model_, self.fit_stats_, self.fitted_ = data, model, seed_stats, True
            self._save_run(ctx, arrays)
        return True


def _batchable(ctxs: list[RunContext], datas: list[EpisodeData]) -> bool:
    """Seeds train as one batch when they share parameters and their episodes' shapes and schedule agree."""
    def shape(data: EpisodeData):
        val = None if data.val is None else tuple(data.val.xs.shape[1:]) + tuple(data.val.xq.shape[1:])
        return len(data.train_tasks), data.n_support, data.n_query, data.n_features, val is None

    return all(ctx.params == ctxs[0].params for ctx in ctxs) and len({shape(d) for d in datas}) == 1
