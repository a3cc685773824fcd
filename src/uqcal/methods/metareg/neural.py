"""Neural baselines: single-task (sqr, ng, bd), MAML (msqr, mng, mbd) and pooled (asqr, ang, abd).

Per-task networks are trained side by side: their parameters are stacked (torch.func.stack_module_state)
and every task's loss is evaluated with torch.func.vmap over torch.func.functional_call, so there is no
Python loop over tasks. Summing the per-task losses gives each task exactly its own gradient, and Adam
(elementwise) then updates each task's network as if it were trained alone.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable

import torch
import torch._dynamo  # noqa: F401  (an optimiser's first step imports it; here, before any timer: core/numerics.py)
from torch import nn
from torch.func import functional_call, stack_module_state, vmap
from torch.nn import functional as F

from uqcal.methods.metareg.batched import SeedBatchedTraining
from uqcal.methods.metareg.episodes import (
    EpisodeData,
    Episodes,
    EpisodicMetaMethod,
    MetaRegMethod,
    early_stopping,
    feedforward,
)
from uqcal.methods.metareg.heads import HEADS, make_head

_HEAD_DEFAULTS = {"head": "ng", "hidden": 32, "layers": 4, "dropout": 0.3, "mc_samples": 30}


def _network(head, data: EpisodeData, params: dict):
    dropout = params["dropout"] if head.name == "bd" else 0.0
    net = feedforward(
        head.input_dim(data.n_features), head.output_dim, params["hidden"], params["layers"], dropout
    )
    return net.to(device=data.device, dtype=data.dtype)


def _task_fns(net, head):
    """Per-task loss / raw prediction as functions of a parameter dict (vmapped over tasks)."""

    def loss(params, x, y):
        return head.loss(lambda inputs: functional_call(net, params, (inputs,)), x, y)

    def raw(params, x):
        return head.raw_prediction(lambda inputs: functional_call(net, params, (inputs,)), x)

    return vmap(loss, randomness="different"), vmap(raw, randomness="different")


def _inner_loop(support_loss: Callable[[dict, int], torch.Tensor], fast: dict, steps: int, lr: float,
                create_graph: bool) -> dict:
    """MAML's inner loop: ``steps`` SGD steps of ``lr`` on the per-task fast weights; ``support_loss(fast, step)``:
    the sum of the tasks' support losses (each task's gradient is its own)."""
    with torch.enable_grad():  # the inner loop needs gradients even when validating under no_grad
        for step in range(steps):
            grads = torch.autograd.grad(support_loss(fast, step), list(fast.values()), create_graph=create_graph)
            fast = {k: v - lr * g for (k, v), g in zip(fast.items(), grads, strict=False)}
    return fast


def _forward_given_masks(net: nn.Sequential, params: dict, masks: list, x):
    """``net``'s forward (``feedforward``'s Linear / ReLU / Dropout) with each Dropout's noise given: the mask
    divided by 1 - p, as torch's dropout multiplies it in, drawn by the caller from a seed's own stream."""
    masks = iter(masks)
    for name, module in net.named_children():
        if isinstance(module, nn.Linear):
            x = F.linear(x, params[f"{name}.weight"], params[f"{name}.bias"])
        elif isinstance(module, nn.ReLU):
            x = F.relu(x)
        elif isinstance(module, nn.Dropout):
            x = x * next(masks)
        else:
            raise TypeError(f"no given-mask forward for {type(module).__name__}")
    return x


class SingleTaskNet(MetaRegMethod):
    """SQR / NG / BD trained from scratch on each meta-test task's support set (Sec. 5.2); ``fit`` only records
    the meta-training tasks' standardisation (all training happens per task, inside ``predict``).

    ``head``: sqr (quantiles, pinball loss) | ng (Gaussian likelihood) | bd (MC dropout); ``epochs`` Adam steps
    of learning rate ``lr`` on the full support set; ``hidden`` units and ``layers`` layers; ``dropout`` and
    ``mc_samples`` for bd.

    Parameters
    ----------
    params : dict, optional
        Parameters as one mapping (positional only); keyword arguments add to it.
    random_state : int, numpy.random.Generator or None, default None
        The seed of the estimator's random streams (task subset, initial weights, episodes).
    device : str or torch.device, default "cpu"
        Where torch computes.
    **kwargs
        ``head`` (sqr | ng | bd), ``hidden``, ``layers``, ``dropout``, ``mc_samples``, ``epochs``, ``lr``,
        ``max_train_tasks``.

    Examples
    --------
    >>> import numpy as np
    >>> from uqcal.methods.metareg import SingleTaskNet
    >>> rng = np.random.default_rng(0)
    >>> tasks = [(x, np.sin(x[:, 0] + rng.uniform(0, 3))) for x in rng.uniform(-3, 3, (8, 50, 1))]
    >>> net = SingleTaskNet(head="ng", epochs=20).fit(tasks)
    >>> x = rng.uniform(-3, 3, (15, 1))
    >>> prediction = net.predict(x[:5], np.sin(x[:5, 0]), x[5:])   # a GaussianPredictive of the 10 queries
    >>> len(prediction)
    10
    """

    defaults = {**_HEAD_DEFAULTS, "epochs": 200, "lr": 1e-2, "max_train_tasks": None}
    choices = {"head": HEADS}

    def _train_model(self, data, generator):
        return None, {"train_seconds": 0.0}  # all training happens per test task, inside predict

    def _predict_episodes(self, model, episodes: Episodes):
        p = self.params
        head = make_head(p["head"], p["dropout"], p["mc_samples"])
        nets = [_network(head, self.data_, p) for _ in range(len(episodes))]
        params, _ = stack_module_state(nets)
        net = copy.deepcopy(nets[0]).to("meta")
        net.train(head.name == "bd")
        batched_loss, batched_raw = _task_fns(net, head)
        optimiser = torch.optim.Adam(params.values(), lr=p["lr"])
        for _ in range(p["epochs"]):
            optimiser.zero_grad()
            batched_loss(params, episodes.xs, episodes.ys).sum().backward()
            optimiser.step()
        with torch.no_grad():
            return head.summarise(batched_raw(params, episodes.xq))


class MamlModule(torch.nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net


class MamlNet(SeedBatchedTraining, EpisodicMetaMethod):
    """MAML (Finn et al.) versions MSQR / MNG / MBD: a meta-learned initialisation, adapted to each task by
    ``inner_steps`` SGD steps of learning rate ``inner_lr`` on its support set (Sec. 5.2: 5 steps of 1e-2).
    ``head`` as SingleTaskNet's; ``first_order`` drops the second-order terms of the meta-gradient.

    ``train_batch`` (a pipeline job's seeds as one model, ``batched.meta_train_batch``) folds the seeds' episodes
    into one inner loop of K * B tasks (``seed_losses``) where ``seed_batchable`` (MNG, MBD), and gives every seed
    its own run's predictions and metrics within rel 1e-6: the per-task arithmetic is the same, only the batched
    kernels' batch size (K * B tasks instead of B) and the reduction of the K * B task gradients onto K
    initialisations differ; measured bit-identical on the default jobs (tests/methods/metareg/test_batched_seeds.py).
    MBD's dropout masks come from each seed's own copy of torch's global stream, drawn in its run's order.

    Parameters
    ----------
    params : dict, optional
        Parameters as one mapping (positional only); keyword arguments add to it.
    random_state : int, numpy.random.Generator or None, default None
        The seed of the estimator's random streams (task subset, initial weights, episodes).
    device : str or torch.device, default "cpu"
        Where torch computes.
    **kwargs
        ``head`` (sqr | ng | bd), ``hidden``, ``layers``, ``dropout``, ``mc_samples``, ``epochs``, ``lr``,
        ``max_train_tasks``, ``inner_lr``, ``inner_steps``, ``first_order`` and
        ``EpisodicMetaMethod.defaults``' early stopping and ``batch_tasks``.

    Examples
    --------
    >>> import numpy as np
    >>> from uqcal.methods.metareg import MamlNet
    >>> rng = np.random.default_rng(0)
    >>> tasks = [(x, np.sin(x[:, 0] + rng.uniform(0, 3))) for x in rng.uniform(-3, 3, (8, 50, 1))]
    >>> maml = MamlNet(head="sqr", epochs=3).fit(tasks, n_support=5, n_query=10)
    >>> x = rng.uniform(-3, 3, (15, 1))
    >>> prediction = maml.predict(x[:5], np.sin(x[:5, 0]), x[5:])   # quantiles on a grid of levels
    >>> bool(((prediction.pit(np.sin(x[5:, 0])) >= 0) & (prediction.pit(np.sin(x[5:, 0])) <= 1)).all())
    True
    """

    defaults = {
        **EpisodicMetaMethod.defaults,
        **_HEAD_DEFAULTS,
        "inner_lr": 1e-2,
        "inner_steps": 5,
        "first_order": False,
    }
    choices = {"head": HEADS}

    def build(self, data: EpisodeData) -> MamlModule:
        self._head = make_head(self.params["head"], self.params["dropout"], self.params["mc_samples"])
        return MamlModule(_network(self._head, data, self.params))

    def adapt(self, model: MamlModule, episodes: Episodes, create_graph: bool,
              init: dict[str, torch.Tensor] | None = None) -> tuple[dict[str, torch.Tensor], Callable, Callable]:
        """The inner loop for all tasks of the batch: per-task fast weights (B, ...) from the shared init.

        Parameters
        ----------
        model : MamlModule
            The meta-learned initialisation.
        episodes : Episodes
            B standardised episodes; ``inner_steps`` SGD steps on each support set.
        create_graph : bool
            Keep the inner loop's graph for second-order meta-gradients.
        init : dict or None, default None
            Each task's initial weights {name: (B, ...) tensor}; None: the model's parameters, shared by all tasks.

        Returns
        -------
        tuple of (dict, callable, callable)
            The fast weights {name: (B, ...) tensor}, and the vmapped per-task loss and raw prediction as
            functions of (weights, x[, y]).
        """
        p = self.params
        model.net.train(self._head.name == "bd")
        batched_loss, batched_raw = _task_fns(model.net, self._head)
        batch = len(episodes)
        with torch.enable_grad():
            fast = init if init is not None else \
                {k: v.unsqueeze(0).expand(batch, *v.shape) for k, v in model.net.named_parameters()}
        fast = _inner_loop(lambda weights, _: batched_loss(weights, episodes.xs, episodes.ys).sum(), fast,
                           p["inner_steps"], p["inner_lr"], create_graph)
        return fast, batched_loss, batched_raw

    def episode_losses(self, model: MamlModule, episodes: Episodes) -> torch.Tensor:
        create_graph = torch.is_grad_enabled() and model.training and not self.params["first_order"]
        fast, batched_loss, _ = self.adapt(model, episodes, create_graph)
        return batched_loss(fast, episodes.xq, episodes.yq)

    def seed_batchable(self) -> bool:
        """MNG's and MBD's seeds train batched (within rel 1e-6 of their own runs; bit-identical on the default
        jobs, whose steps are launch-bound: see docs/metareg.md, "Seeds trained as one batch"). MBD's dropout
        masks come from torch's global stream (training, validation, MC prediction): each seed draws from its own
        copy, in its own run's order (``global_stream``, ``_given_mask_losses``). MSQR's seeds train one after
        another: its step is bound by its batched matmuls (9 quantile levels per point, second order), and the
        K-seed batch, bit-identical too, cost 0-9 % more CPU on the default jobs.

        Returns
        -------
        bool
            True for ``head`` ng or bd.
        """
        return self.params["head"] in ("ng", "bd")

    def seed_losses(self, template: MamlModule) -> Callable[[dict, dict, list[Episodes]], torch.Tensor]:
        """Each seed's training loss (K,) for ``meta_train_batch``: the K seeds' B episodes folded into one batch
        of K * B tasks, each task's fast weights starting from its own seed's initialisation (the inner loop is
        already per task), each seed's loss the mean over its own B query losses, as ``loss``.

        Parameters
        ----------
        template : MamlModule
            The seeds' architecture, on the meta device (functional_call runs it on the fast weights).

        Returns
        -------
        callable
            ``losses(stacked, buffers, episodes, streams=None)``: the stacked parameters ({"net.<name>": (K, ...)}),
            buffers (none) and one Episodes of B per seed -> the K losses; ``streams``: MBD's seeds' copies of
            torch's global generator (``global_stream``), from which each seed's dropout masks are drawn.
        """

        def losses(stacked: dict, buffers: dict, episodes: list[Episodes],
                   streams: list[torch.Generator] | None = None) -> torch.Tensor:
            n_seeds, batch = len(episodes), len(episodes[0])
            folded = Episodes(*(torch.cat([getattr(e, name) for e in episodes]) for name in ("xs", "ys", "xq", "yq")))
            init = {name.removeprefix("net."): v.unsqueeze(1).expand(n_seeds, batch, *v.shape[1:]).flatten(0, 1)
                    for name, v in stacked.items()}
            create_graph = torch.is_grad_enabled() and template.training and not self.params["first_order"]
            if streams is not None:  # dropout: each seed's masks from its own stream
                return self._given_mask_losses(template, folded, init, create_graph, streams).reshape(
                    n_seeds, batch).mean(1)
            fast, batched_loss, _ = self.adapt(template, folded, create_graph, init)
            return batched_loss(fast, folded.xq, folded.yq).reshape(n_seeds, batch).mean(1)

        return losses

    @property
    def global_stream(self) -> bool:
        """MBD's training draws dropout masks from torch's global generator (``train_batch``: a copy per seed)."""
        return self.params["head"] == "bd"

    def _given_mask_losses(self, template: MamlModule, folded: Episodes, init: dict, create_graph: bool,
                           streams: list[torch.Generator]) -> torch.Tensor:
        """``adapt`` and the query losses of K seeds' folded episodes (K * B tasks) with each seed's dropout masks
        drawn from its own stream, in its own run's order (every support forward's layers, then the query's):
        what one seed's vmapped dropout draws, (B, rows, width) per layer."""
        p, head, net = self.params, self._head, template.net
        keep = 1.0 - p["dropout"]
        widths = [module.out_features for module in net if isinstance(module, nn.Linear)][:-1]
        batch = len(folded) // len(streams)

        def draw(stream, rows):
            return [torch.empty(batch, rows, width, dtype=folded.xs.dtype, device="cpu")
                    .bernoulli_(keep, generator=stream).div_(keep).to(folded.xs.device) for width in widths]

        forwards = [[draw(stream, folded.xs.shape[1]) for _ in range(p["inner_steps"])] + [draw(stream, folded.xq.shape[1])]
                    for stream in streams]  # [seed][forward][layer]
        masks = [[torch.cat([seed[f][layer] for seed in forwards]) for layer in range(len(widths))]
                 for f in range(p["inner_steps"] + 1)]  # [forward][layer]: (K * B, rows, width)

        def task_loss(params, task_masks, x, y):
            return head.loss(lambda inputs: _forward_given_masks(net, params, task_masks, inputs), x, y)

        batched_loss = vmap(task_loss)
        fast = _inner_loop(lambda weights, step: batched_loss(weights, masks[step], folded.xs, folded.ys).sum(), init,
                           p["inner_steps"], p["inner_lr"], create_graph)
        return batched_loss(fast, masks[-1], folded.xq, folded.yq)

    def _predict_episodes(self, model, episodes):
        fast, _, batched_raw = self.adapt(model, episodes, create_graph=False)
        with torch.no_grad():
            fast = {k: v.detach() for k, v in fast.items()}
            return self._head.summarise(batched_raw(fast, episodes.xq))


class PooledNet(MetaRegMethod):
    """ASQR / ANG / ABD (Table 5): one network trained on the pooled meta-training data, no adaptation (the
    support set is not used). Minibatch Adam (``batch_size`` rows, ``epochs`` passes); early stopping on the
    meta-validation episodes' query points, when ``fit`` is given them. ``head`` as SingleTaskNet's.

    Parameters
    ----------
    params : dict, optional
        Parameters as one mapping (positional only); keyword arguments add to it.
    random_state : int, numpy.random.Generator or None, default None
        The seed of the estimator's random streams (task subset, initial weights, episodes).
    device : str or torch.device, default "cpu"
        Where torch computes.
    **kwargs
        ``head`` (sqr | ng | bd), ``hidden``, ``layers``, ``dropout``, ``mc_samples``, ``epochs``, ``lr``,
        ``max_train_tasks``, ``batch_size`` and early stopping (``eval_every``, ``patience``).

    Examples
    --------
    >>> import numpy as np
    >>> from uqcal.methods.metareg import PooledNet
    >>> rng = np.random.default_rng(0)
    >>> tasks = [(x, np.sin(x[:, 0] + rng.uniform(0, 3))) for x in rng.uniform(-3, 3, (8, 50, 1))]
    >>> pooled = PooledNet(head="bd", epochs=2, mc_samples=5).fit(tasks)
    >>> x = rng.uniform(-3, 3, (15, 1))
    >>> float(pooled.predict(x[:5], np.sin(x[:5, 0]), x[5:]).std.min()) > 0
    True
    """

    defaults = {
        **_HEAD_DEFAULTS,
        "epochs": 100,
        "lr": 1e-2,
        "batch_size": 256,
        "eval_every": 1,  # Adam steps: i.e. at the end of every epoch
        "patience": 1000,  # Adam steps (about 10 epochs of ozone's pooled rows)
        "max_train_tasks": None,
    }
    choices = {"head": HEADS}

    def _train_model(self, data, generator):
        p = self.params
        head = make_head(p["head"], p["dropout"], p["mc_samples"])
        net = _network(head, data, p)
        X, y = data.pooled()
        validate = data.val is not None
        if validate:
            val_x, val_y = data.val.xq.reshape(-1, data.n_features), data.val.yq.reshape(-1)
        optimiser = torch.optim.Adam(net.parameters(), lr=p["lr"])
        stopper = early_stopping(p)
        stopper.best_state = copy.deepcopy(net.state_dict())
        steps, epochs_run, failures = 0, 0, 0
        start = time.perf_counter()
        for epoch in range(p["epochs"]):
            net.train()
            order = torch.randperm(len(y), generator=generator).to(data.device)
            for first in range(0, len(y), p["batch_size"]):
                rows = order[first : first + p["batch_size"]]
                optimiser.zero_grad()
                loss = head.loss(net, X[rows], y[rows])
                if not torch.isfinite(loss):
                    failures += 1
                    break
                loss.backward()
                optimiser.step()
                steps += 1
            epochs_run = epoch + 1
            if failures:
                break
            if validate and stopper.due(steps):  # the whole val query set: thousands of points, so no smoothing needed
                net.eval()
                with torch.no_grad():
                    val = float(head.loss(net, val_x, val_y))
                if not math.isfinite(val):
                    failures += 1
                    break
                if stopper.update(steps, val, net.state_dict()):
                    break
        if failures:
            self.runtime.log.warning("%s seed %d: non-finite loss at step %d; training stopped, the best state "
                                     "(step %d) restored", self.runtime.name, self.runtime.seed, steps,
                                     stopper.best_step)
        if validate or failures:  # without validation episodes the last state is kept
            net.load_state_dict(stopper.best_state)
        self._head = head
        return net, {
            "fit_failures": failures,
            "train_seconds": time.perf_counter() - start,
            "epochs_run": epochs_run,
            "steps_run": steps,
            "best_step": stopper.best_step,
            "best_val_loss": stopper.best,
        }

    def _predict_episodes(self, net, episodes):
        net.train(self._head.name == "bd")  # MC dropout stays on at prediction time
        with torch.no_grad():
            batch, n_query = episodes.xq.shape[:2]
            raw = self._head.raw_prediction(net, episodes.xq.reshape(batch * n_query, -1))
            return self._head.summarise(raw.reshape(batch, n_query, -1))
