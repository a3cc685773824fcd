"""The fewshot family's cheaper code paths give bit-identical results to the plain ones they replace.

Each test compares against an independent reference: nn.MaxPool2d / the Conv4 module stack, torch.optim.Adam,
and a ``*_ts`` run that recomputes the test episodes instead of reusing the base run's outputs.
"""

from __future__ import annotations

import copy

import pandas as pd
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from tests.fewshot_fakes import FakeContext, synthetic_glyphs, synthetic_split
from uqcal.io import read_json
from uqcal.methods.fewshot import METHODS
from uqcal.methods.fewshot.backbones import Conv4, max_pool_2x2
from uqcal.optim import ForeachAdam, make_adam

torch.set_num_threads(1)


def images_with_ties(n=12, size=28, seed=0):
    """Random images with constant regions, so that pooling windows hold exactly equal maxima."""
    gen = torch.Generator().manual_seed(seed)
    images = torch.rand(n, size, size, generator=gen)
    images[:, : size // 3] = 0.0
    images[:, :, -size // 4 :] = 0.7
    images[: n // 4] = 1.0
    return images


@pytest.mark.parametrize("shape", [(3, 4, 8, 8), (2, 3, 7, 9), (2, 2, 5, 4)])
def test_max_pool_2x2_matches_f_max_pool2d_in_values_and_gradients(shape):
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(shape, generator=gen).double()
    x[0, 0] = 0.5  # a constant plane: every window is a tie
    x[..., 0, :2] = x[..., 1, :2]  # ties across rows
    grad_out = torch.randn(shape[0], shape[1], shape[2] // 2, shape[3] // 2, generator=gen).double()
    ours_in, ref_in = x.clone().requires_grad_(), x.clone().requires_grad_()
    ours, ref = max_pool_2x2(ours_in), F.max_pool2d(ref_in, 2)
    assert torch.equal(ours, ref)
    ours.backward(grad_out)
    ref.backward(grad_out)
    assert torch.equal(ours_in.grad, ref_in.grad)
    with torch.no_grad():  # the no-autograd path (no indices)
        assert torch.equal(max_pool_2x2(x), F.max_pool2d(x, 2))
    # second order (MAML with first_order: false differentiates through the backward)
    ours_in, ref_in = x.clone().requires_grad_(), x.clone().requires_grad_()
    g_ours = torch.autograd.grad(max_pool_2x2(ours_in).pow(3).sum(), ours_in, create_graph=True)[0]
    g_ref = torch.autograd.grad(F.max_pool2d(ref_in, 2).pow(3).sum(), ref_in, create_graph=True)[0]
    h_ours = torch.autograd.grad(g_ours.sin().sum(), ours_in)[0]
    h_ref = torch.autograd.grad(g_ref.sin().sum(), ref_in)[0]
    assert torch.equal(g_ours, g_ref) and torch.equal(h_ours, h_ref)


@pytest.mark.parametrize("train", [True, False])
def test_conv4_forward_matches_its_module_stack_bit_for_bit(train):
    """Conv4.forward reorders relu/maxpool and pools its own way; nn.Sequential of the same modules is the
    reference. Outputs, parameter gradients and batch-norm running statistics must be identical."""
    torch.manual_seed(0)
    ours = Conv4(in_channels=1, width=6).train(train)
    ref = copy.deepcopy(ours)
    images = images_with_ties()

    def ref_forward(x):
        return ref.body(x.unsqueeze(1)).flatten(1)

    out_ours, out_ref = ours(images), ref_forward(images)
    assert torch.equal(out_ours, out_ref)
    (out_ours.sin().sum() + out_ours.pow(2).mean()).backward()
    (out_ref.sin().sum() + out_ref.pow(2).mean()).backward()
    for (name, p), q in zip(ours.named_parameters(), ref.parameters(), strict=True):
        assert torch.equal(p.grad, q.grad), name
    for a, b in zip(ours.buffers(), ref.buffers(), strict=True):
        assert torch.equal(a, b)
    with torch.no_grad():
        assert torch.equal(ours(images), ref_forward(images))
    if train:  # second-order gradients, as second-order MAML takes them
        g_ours = torch.autograd.grad(ours(images).pow(2).sum(), list(ours.parameters()), create_graph=True)
        g_ref = torch.autograd.grad(ref_forward(images).pow(2).sum(), list(ref.parameters()), create_graph=True)
        h_ours = torch.autograd.grad(sum(g.pow(2).sum() for g in g_ours), list(ours.parameters()))
        h_ref = torch.autograd.grad(sum(g.pow(2).sum() for g in g_ref), list(ref.parameters()))
        assert all(torch.equal(a, b) for a, b in zip(h_ours, h_ref, strict=True))


def test_cpu_adam_matches_torch_adam_step_for_step():
    torch.manual_seed(0)

    def make():
        torch.manual_seed(0)
        return nn.ModuleDict({"a": nn.Linear(6, 4), "b": nn.Linear(4, 3), "unused": nn.Linear(2, 2)})

    ours_model, ref_model = make(), make()

    def groups(model):
        return [
            {"params": list(model["a"].parameters()) + list(model["unused"].parameters()), "lr": 1e-3},
            {"params": list(model["b"].parameters()), "lr": 3e-2},
        ]

    ours, ref = make_adam(groups(ours_model)), torch.optim.Adam(groups(ref_model))
    assert isinstance(ours, ForeachAdam)
    gen = torch.Generator().manual_seed(3)
    for step in range(12):
        x = torch.randn(5, 6, generator=gen) * (10.0 if step % 4 == 0 else 0.1)
        for model, opt in ((ours_model, ours), (ref_model, ref)):
            opt.zero_grad(set_to_none=True)
            loss = model["b"](torch.tanh(model["a"](x))).pow(2).mean()
            if step % 3 == 1:  # a parameter that sometimes has a gradient and sometimes none
                loss = loss + model["unused"].weight.sum() * 0.5
            loss.backward()
            opt.step()
        for (name, p), q in zip(ours_model.named_parameters(), ref_model.parameters(), strict=True):
            assert torch.equal(p, q), (step, name)
    assert not ForeachAdam.supports([{"params": [torch.zeros(2, dtype=torch.complex64)], "lr": 1e-3}])
    assert not ForeachAdam.supports([{"params": [torch.zeros(2)], "lr": 1e-3, "weight_decay": 0.1}])
    assert not ForeachAdam.supports([{"params": [torch.zeros(2)], "lr": torch.tensor(1e-3)}])


TINY = {"train_episodes": 2, "width": 8, "n_pred_samples": 40, "inner_steps_test": 3}


def count_query_outputs(monkeypatch, cls) -> list:
    """Record the query-set size of every episode the model predicts (``query_outputs`` calls)."""
    calls: list[int] = []
    real = cls.query_outputs

    def spy(self, model, episode):
        calls.append(episode.query_x.shape[0])
        return real(self, model, episode)

    monkeypatch.setattr(cls, "query_outputs", spy)
    return calls


def tiny_split():
    table = synthetic_glyphs(n_classes=24, per_class=12, n_groups=4)
    return table, synthetic_split(table, n_way=5, k_shot=2, n_query=4, n_val=2, n_test=3)


@pytest.mark.parametrize("base", ["protonet", "maml", "dkt"])
def test_temperature_scaling_reuses_the_base_test_outputs_bit_for_bit(base, tmp_path, monkeypatch):
    """A `*_ts` run that redraws the base run's kept test outputs writes exactly what a run that
    recomputes the test episodes (the reference: the same base model.pt without them) writes."""
    table, split = tiny_split()
    cls = METHODS[base].load_class()
    method = cls({k: v for k, v in TINY.items() if k in cls.defaults})
    base_dir = tmp_path / base
    method.train(FakeContext(table, split, method.params, base_dir, method=base, n_query_train=4))
    saved = torch.load(base_dir / "model.pt", weights_only=False)
    assert len(saved["test_outputs"]["outputs"]) == len(split["test_episodes"])
    stripped_dir = tmp_path / f"{base}_without_outputs"
    stripped_dir.mkdir()
    torch.save({k: v for k, v in saved.items() if k != "test_outputs"}, stripped_dir / "model.pt")

    runs, calls = {}, {}
    for name, depends_dir in (("reused", base_dir), ("recomputed", stripped_dir)):
        calls[name] = count_query_outputs(monkeypatch, cls)
        ts = METHODS[f"{base}_ts"].load_class()()
        runs[name] = tmp_path / f"{base}_ts_{name}"
        ts.train(FakeContext(table, split, ts.params, runs[name], method=f"{base}_ts", depends_dir=depends_dir))
        monkeypatch.undo()
    assert len(calls["reused"]) == len(split["val_episodes"])  # the test episodes are not run again
    assert len(calls["recomputed"]) == len(split["val_episodes"]) + len(split["test_episodes"])
    reused, recomputed = (pd.read_parquet(runs[k] / "predictions.parquet") for k in ("reused", "recomputed"))
    pd.testing.assert_frame_equal(reused, recomputed, check_exact=True)
    assert read_json(runs["reused"] / "train_stats.json") == read_json(runs["recomputed"] / "train_stats.json")
    assert "test_outputs" not in torch.load(runs["reused"] / "model.pt", weights_only=False)


def test_temperature_scaling_recomputes_when_the_test_episodes_differ(tmp_path, monkeypatch):
    table, split = tiny_split()
    cls = METHODS["protonet"].load_class()
    base_dir = tmp_path / "protonet"
    method = cls({"train_episodes": 2, "width": 8})
    method.train(FakeContext(table, split, method.params, base_dir, method="protonet"))
    other = dict(split, test_episodes=split["test_episodes"][::-1])  # same episodes, another order
    calls = count_query_outputs(monkeypatch, cls)
    ts = METHODS["protonet_ts"].load_class()()
    ts.train(FakeContext(table, other, ts.params, tmp_path / "ts", method="protonet_ts", depends_dir=base_dir))
    assert len(calls) == len(other["val_episodes"]) + len(other["test_episodes"])


@pytest.mark.parametrize("inference", ["md", "gd"])
@pytest.mark.parametrize("k_shot", [1, 2])
def test_batched_episode_prediction_matches_one_by_one(inference, k_shot):
    """md/gd predict a batch of episodes at once (``logit_samples_batch``); the reference is
    ``logit_samples`` episode by episode from the same generator state: same samples bit for bit, the
    generator left in the same state, the same jitter escalations (1-shot cosine kernels are singular, so
    gd's Cholesky of K escalates: per episode, never for the whole batch)."""
    from uqcal.gp.linalg import JitterCounter
    from uqcal.methods.fewshot.md import MirrorDescentGP

    table = synthetic_glyphs(n_classes=24, per_class=12, n_groups=4)
    split = synthetic_split(table, n_way=5, k_shot=k_shot, n_query=3, n_val=5, n_test=1)
    from uqcal.methods.fewshot.common import EpisodeData

    data = EpisodeData(table.images, table.y, torch.device("cpu"))
    episodes = [data.episode(spec) for spec in split["val_episodes"]]
    method = MirrorDescentGP(
        {"inference": inference, "width": 8, "n_mc_samples": 16, "n_pred_samples": 20, "steps_test": 4}
    )
    torch.manual_seed(0)
    model = method.build_model(5, 28).eval()
    results = {}
    for name in ("one_by_one", "batched"):
        method.counter = JitterCounter()
        gen = torch.Generator().manual_seed(7)
        with torch.no_grad():
            if name == "batched":
                samples = method.logit_samples_batch(model, episodes, gen)
            else:
                samples = [method.logit_samples(model, episode, gen) for episode in episodes]
        results[name] = (samples, gen.get_state(), method.counter.escalations)
    (ref, ref_state, ref_esc), (ours, our_state, our_esc) = results["one_by_one"], results["batched"]
    assert len(ours) == len(ref) == len(episodes)
    for a, b in zip(ours, ref, strict=True):
        assert a.shape == b.shape and torch.equal(a, b)
    assert torch.equal(our_state, ref_state) and our_esc == ref_esc
    if inference == "gd" and k_shot == 1:
        assert ref_esc > 0  # the per-episode jitter path was exercised
    assert method.episode_batch_size(split["val_episodes"][0]) > 1


def test_elbo_curves_with_common_noise_match_reseeded_generators():
    """The convergence curves draw their common random numbers once (``CommonNoise``); the reference
    re-seeds a fresh generator before every ELBO evaluation, as the curves were first written."""
    from uqcal.gp.linalg import JitterCounter
    from uqcal.methods.fewshot.gp_core import (
        ClassKernels,
        dense_elbo,
        md_elbo,
        run_gradient_descent,
        run_mirror_descent,
        softmax_expectations_fn,
    )
    from uqcal.methods.fewshot.md import MirrorDescentGP

    torch.manual_seed(0)
    kernels = ClassKernels("cosine", 3)
    with torch.no_grad():
        (x,) = kernels.prepare(torch.randn(7, 4))
        kernel = kernels(x)
    onehot = F.one_hot(torch.tensor([0, 1, 2, 0, 1, 2, 0]), 3).T.float()
    method = MirrorDescentGP({"convergence_steps": 4, "convergence_mc_samples": 50, "n_mc_samples": 16})
    method.counter = JitterCounter()
    seed = 11
    md_curve, gd_curve = method.elbo_curves(kernel, onehot, seed)

    ref_md, ref_gd = [], []
    rho, n_mc = method.params["convergence_rho"], 50
    with torch.no_grad():
        expectations = softmax_expectations_fn(onehot, "marginal", 16, None, torch.Generator().manual_seed(seed + 1))
        run_mirror_descent(
            kernel, expectations, 4, rho,
            callback=lambda _s, post: ref_md.append(float(md_elbo(post, onehot, n_mc, torch.Generator().manual_seed(seed)))),
        )

    def record_gd(_s, chol, mean, tril):
        with torch.no_grad():
            ref_gd.append(float(dense_elbo(chol, mean, tril, onehot, n_mc, torch.Generator().manual_seed(seed))))

    run_gradient_descent(kernel, onehot, 4, rho, 16, None, torch.Generator().manual_seed(seed + 2), callback=record_gd)
    assert md_curve == ref_md and gd_curve == ref_gd and len(md_curve) == 5
