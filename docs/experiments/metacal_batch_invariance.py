"""Issue 53 groundwork: which operations of MetaCal's training step give each seed the same bits when K seeds'
B episodes run as one batch of K * B (or a stacked (K, ...) model) as when each seed's B run alone (CPU, float64,
the portable numerics). Run: PYTHONPATH=src .venv/bin/python docs/experiments/metacal_batch_invariance.py"""

from uqcal.core.numerics import activate, configure_torch

activate("portable")

import torch  # noqa: E402

from uqcal.core.gp.exact import batched_gp_posterior, squared_distances  # noqa: E402

configure_torch("portable", 1)
torch.manual_seed(0)
DT = torch.float64


def same(a, b):
    return bool(torch.equal(a, b))


def report(name, pairs):
    bad = [i for i, (a, b) in enumerate(pairs) if not same(a, b)]
    worst = max(float(((a - b).abs() / b.abs().clamp_min(1e-300)).max()) for a, b in pairs)
    print(f"{name:60s} {'IDENTICAL' if not bad else f'DIFFERS ({len(bad)}/{len(pairs)}) max rel {worst:.1e}'}")


def per_seed_vs_batch(name, fn, inputs, K, B):
    """fn on all K*B rows at once vs fn on each seed's B rows; outputs and input gradients."""
    leaves = [x.detach().clone().requires_grad_(True) for x in inputs]
    out = fn(*leaves)
    out = out if isinstance(out, tuple) else (out,)
    weights = [torch.randn_like(o) for o in out]
    sum(((o * w).sum() for o, w in zip(out, weights, strict=True)), torch.zeros((), dtype=DT)).backward()
    fwd, grads = [], []
    for k in range(K):
        rows = slice(k * B, (k + 1) * B)
        part = [x.detach()[rows].clone().requires_grad_(True) for x in inputs]
        o = fn(*part)
        o = o if isinstance(o, tuple) else (o,)
        sum(((oo * w[rows]).sum() for oo, w in zip(o, weights, strict=True)), torch.zeros((), dtype=DT)).backward()
        fwd += [(a[rows].detach(), b.detach()) for a, b in zip(out, o, strict=True)]
        grads += [(a.grad[rows], b.grad) for a, b in zip(leaves, part, strict=True)]
    report(name + " forward", fwd)
    report(name + " grads", grads)


def gp_inputs(KB, S, Q, H=32, D=4):
    z = torch.randn(KB, S + Q, H, dtype=DT)
    return z, torch.randn(KB, S, dtype=DT), torch.randn(KB, S + Q, dtype=DT)


def gp_step(z, ys, m, beta=0.3):
    S = ys.shape[1]
    K = torch.exp(-0.5 * squared_distances(z[:, :S], z))
    eye = torch.eye(S, dtype=DT)
    K_ss = K[..., :S] + beta * eye
    K_sq = torch.cat([K[..., S:], K[..., :S]], -1)
    m_q = torch.cat([m[:, S:], m[:, :S]], -1)
    kqq = torch.full((1, 1), 1.0 + beta, dtype=DT).expand(K_sq.shape[0], K_sq.shape[-1])
    return batched_gp_posterior(K_ss, K_sq, kqq, ys, m[:, :S], m_q)


for (K, B, S, Q) in [(5, 20, 10, 30), (5, 20, 20, 30), (5, 32, 10, 30), (5, 32, 20, 30), (5, 10, 20, 30)]:
    print(f"--- K={K} seeds x B={B} episodes, S={S}, Q={Q}")
    KB = K * B
    A = torch.randn(KB, S, 32, dtype=DT)
    C = torch.randn(KB, 32, S + Q, dtype=DT)
    per_seed_vs_batch("bmm (B,S,32)@(B,32,N)", lambda a, c: a @ c, [A, C], K, B)
    L = torch.randn(KB, S, S, dtype=DT)
    spd = L @ L.transpose(-1, -2) + S * torch.eye(S, dtype=DT)
    per_seed_vs_batch("cholesky", lambda x: torch.linalg.cholesky_ex(x)[0], [spd], K, B)
    chol = torch.linalg.cholesky(spd)
    rhs = torch.randn(KB, S, 1, dtype=DT)
    per_seed_vs_batch("cholesky_solve", lambda r, c: torch.cholesky_solve(r, c), [rhs, chol], K, B)
    rhs2 = torch.randn(KB, S, S + Q, dtype=DT)
    per_seed_vs_batch("solve_triangular", lambda c, r: torch.linalg.solve_triangular(c, r, upper=False),
                      [chol, rhs2], K, B)
    per_seed_vs_batch("sum(-2) of (B,S,M)", lambda x: (x * x).sum(-2), [rhs2], K, B)
    per_seed_vs_batch("sort + mean(-1)", lambda x: x.sort(-1).values.abs().mean(-1), [rhs2[:, 0]], K, B)
    per_seed_vs_batch("GP posterior (exact.py) incl. squared_distances, exp",
                      gp_step, list(gp_inputs(KB, S, Q)), K, B)


# ---- end to end: one training step's losses and gradients, K stacked seeds vs each seed's own model ----------
from torch.func import stack_module_state  # noqa: E402

from uqcal.methods.metareg import MetaCal  # noqa: E402
from uqcal.methods.metareg.episodes import Episodes  # noqa: E402
from uqcal.methods.metareg.metacal import _StackedDeepKernelGP  # noqa: E402


def end_to_end(objective, K=5, B=20, S=10, Q=30, D=4, seed=0):
    method = MetaCal(objective=objective, calibration="none" if objective == "nll" else "gmm")
    models = []
    for k in range(K):
        torch.manual_seed(seed * 100 + k)
        models.append(method.build(type("Data", (), {"n_features": D})()).to(DT))
    episodes = [Episodes(torch.randn(B, S, D, dtype=DT), torch.randn(B, S, dtype=DT),
                         torch.randn(B, Q, D, dtype=DT), torch.randn(B, Q, dtype=DT)) for _ in range(K)]
    alone = []
    for model, e in zip(models, episodes, strict=True):
        model.zero_grad()
        loss = method.loss(model, e)
        loss.backward()
        alone.append((loss.detach(), {n: p.grad for n, p in model.named_parameters()}))
    stacked, _ = stack_module_state(models)
    folded = Episodes(*(torch.stack([getattr(e, n) for e in episodes]) for n in ("xs", "ys", "xq", "yq")))
    losses = method.episode_losses(_StackedDeepKernelGP(models[0], stacked), folded).mean(-1)
    losses.sum().backward()
    pairs = [(losses[k].detach(), alone[k][0]) for k in range(K)]
    pairs += [(stacked[n].grad[k], alone[k][1][n]) for n in stacked if stacked[n].grad is not None for k in range(K)]
    report(f"{objective} K={K} B={B} S={S} D={D}: losses + every gradient", pairs)
    for name in stacked:
        if stacked[name].grad is not None and not all(same(stacked[name].grad[k], alone[k][1][name])
                                                      for k in range(K)):
            report(f"   grad {name}", [(stacked[name].grad[k], alone[k][1][name]) for k in range(K)])


print("--- a hidden layer (32 -> 32) of K seeds: baddbmm over the seeds vs nn.Linear per seed (rows B * (S + Q))")
for rows in (800, 1600):
    xs_ = torch.randn(5, rows, 32, dtype=DT)
    w_, b_ = torch.randn(5, 32, 32, dtype=DT), torch.randn(5, 32, dtype=DT)
    per_seed_vs_batch(f"baddbmm, {rows} rows (vs F.linear)",
                      lambda x, w, b: torch.baddbmm(b[:, None, :], x, w.transpose(1, 2)) if len(x) > 1
                      else torch.nn.functional.linear(x[0], w[0], b[0])[None], [xs_, w_, b_], 5, 1)

print("--- end to end: one step's K losses and every parameter's gradient, stacked vs each seed alone")
for seed, (B, S, D) in enumerate([(20, 10, 4), (20, 20, 4), (32, 10, 8), (32, 20, 8), (10, 20, 3)]):
    for objective in ("calib", "nll"):
        end_to_end(objective, B=B, S=S, D=D, seed=seed)
for n_seeds in (1, 2, 3):  # what is left of a batch once seeds have stopped
    end_to_end("calib", K=n_seeds, seed=7)
