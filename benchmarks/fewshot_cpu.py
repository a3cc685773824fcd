"""fewshot CPU fast paths against the plain code they replace: CPU time and bit-identity, in one process.

- Conv4 forward + backward (train mode) and no-grad forward: ``Conv4.forward`` (ReLU after pooling,
  ``max_pool_2x2``) vs the module stack ``Conv4.body`` (conv, BN, ReLU, nn.MaxPool2d).
- md / gd prediction of 30 episodes (5-way 5-shot, 15 queries, the default config's inner loop): one by one
  (``logit_samples``) vs batched (``logit_samples_batch``).
Data: random images with blank regions (ties in the pooling windows); an untrained model. 1 thread.
Run: PYTHONPATH=src python benchmarks/fewshot_cpu.py [--repeats 10]
"""

from __future__ import annotations

import argparse
import time

import torch

from uqcal.gp.linalg import JitterCounter
from uqcal.methods.fewshot.common import Episode
from uqcal.methods.fewshot.md import MirrorDescentGP


def cpu_ms(fn, repeats: int) -> float:
    """Median CPU milliseconds of `repeats` calls (CPU time: less disturbed by a shared machine)."""
    times = []
    for _ in range(repeats):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return 1e3 * sorted(times)[len(times) // 2]


def images(n: int, gen: torch.Generator) -> torch.Tensor:
    x = torch.rand(n, 28, 28, generator=gen)
    x[:, :8] = 0.0
    return x


def backbone(repeats: int, width: int) -> None:
    torch.manual_seed(0)
    model = MirrorDescentGP({"width": width}).build_model(5, 28).backbone.train()
    x = images(100, torch.Generator().manual_seed(0))

    def plain():
        return model.body(x.unsqueeze(1)).flatten(1)

    def run(forward):
        model.zero_grad(set_to_none=True)
        out = forward()
        out.sin().sum().backward()
        return out.detach(), [p.grad.clone() for p in model.parameters()]

    def ours():
        return model(x)

    (out_a, grads_a), (out_b, grads_b) = run(plain), run(ours)
    same = torch.equal(out_a, out_b) and all(torch.equal(a, b) for a, b in zip(grads_a, grads_b, strict=True))
    print(f"Conv4 width {width}, 100 images 28x28, train mode, forward + backward:")
    print(f"  module stack {cpu_ms(lambda: run(plain), repeats):7.1f} ms   Conv4.forward "
          f"{cpu_ms(lambda: run(ours), repeats):7.1f} ms   bit-identical: {same}")
    model.eval()
    with torch.no_grad():
        same = torch.equal(plain(), ours())
        print("  eval, no grad:")
        print(f"  module stack {cpu_ms(plain, repeats):7.1f} ms   Conv4.forward {cpu_ms(ours, repeats):7.1f} ms"
              f"   bit-identical: {same}")


def prediction(inference: str, repeats: int, width: int) -> None:
    gen = torch.Generator().manual_seed(1)
    labels_s, labels_q = torch.arange(5).repeat_interleave(5), torch.arange(5).repeat_interleave(15)
    episodes = [Episode(images(25, gen), labels_s, images(75, gen), labels_q, 5) for _ in range(30)]
    method = MirrorDescentGP({"inference": inference, "width": width, "n_mc_samples": 128, "n_pred_samples": 300})
    method.counter = JitterCounter()
    torch.manual_seed(0)
    model = method.build_model(5, 28).eval()
    out = {}

    def one_by_one():
        g = torch.Generator().manual_seed(3)
        out["one"] = [method.logit_samples(model, e, g) for e in episodes]

    def batched():
        g = torch.Generator().manual_seed(3)
        size = method.episode_batch_size({"classes": [0] * 5, "support": [0] * 25, "query": [0] * 75})
        out["batch"] = [s for i in range(0, 30, size) for s in method.logit_samples_batch(model, episodes[i : i + size], g)]

    with torch.no_grad():
        t_one, t_batch = cpu_ms(one_by_one, repeats), cpu_ms(batched, repeats)
    same = all(torch.equal(a, b) for a, b in zip(out["one"], out["batch"], strict=True))
    print(f"{inference} prediction, 30 episodes 5w5s, 15 queries/class, {method.params['steps_test']} inner steps:")
    print(f"  one by one {t_one:9.1f} ms   batched {t_batch:9.1f} ms   bit-identical: {same}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--width", type=int, default=32)
    args = parser.parse_args()
    torch.set_num_threads(1)
    backbone(args.repeats, args.width)
    for inference in ("md", "gd"):
        prediction(inference, max(1, args.repeats // 5), args.width)


if __name__ == "__main__":
    main()
