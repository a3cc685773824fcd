"""MD-BFSC speed: marginal vs full-covariance (authors) sampling per test episode; meta-training rate;
Conv4 forward + backward in channels-last memory format (what Conv4 uses) vs the default NCHW layout; a
validation check episode by episode vs batched through the backbone (`EpisodicMethod.collect_logits`), and the
checks of the paper-scale protocol (paper.yaml before: 600 episodes after every epoch; the authors' train.py:
100 episodes after every 30th epoch and every epoch of the last 100); `--threads` also times Conv4 at 84 x 84
on 1 and 2 intra-op threads (CPU seconds and wall).

Same process, same trained model, same test episodes (5-way 5-shot, 50 MD steps, rho = 0.5).
Data: sklearn digits upsampled to 28x28 (always available offline), classes 0-4 train, 5-9 test.
Run: PYTHONPATH=src python benchmarks/fewshot_speed.py [--train-episodes 40] [--test-episodes 5] [--check-episodes 20]
     [--threads]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch.nn import functional as F

from uqcal.core.gp.linalg import JitterCounter
from uqcal.data.splits import class_rows, sample_fewshot_episode
from uqcal.methods.fewshot.base import EpisodeArrays
from uqcal.methods.fewshot.episodic import Episode, episode_tensors
from uqcal.methods.fewshot.gp_core import mc_softmax
from uqcal.methods.fewshot.md import MirrorDescentGP


def digits28():
    digits = load_digits()
    images = torch.as_tensor(digits.images / 16.0, dtype=torch.float32).unsqueeze(1)
    images = F.interpolate(images, size=(28, 28), mode="bilinear", align_corners=False).squeeze(1)
    return images.numpy(), digits.target.astype(str)


def backbone_layouts(width: int, repeats: int = 20) -> None:
    """Conv4 forward + backward on 100 28x28 images (a 5-shot training episode): the same weights in NCHW
    and channels-last (Conv4's) layout; median CPU ms and the largest output difference."""
    from uqcal.methods.fewshot.backbones import Conv4

    torch.manual_seed(0)
    model = Conv4(1, width).train()
    x = torch.rand(100, 1, 28, 28)

    def run(layout):
        body = model.body.to(memory_format=layout)
        times = []
        for _ in range(repeats):
            start = time.process_time()
            body.zero_grad()
            out = body(x.contiguous(memory_format=layout)).flatten(1)
            out.sum().backward()
            times.append(time.process_time() - start)
        return 1e3 * sorted(times)[repeats // 2], out.detach()

    (nchw, a), (last, b) = run(torch.contiguous_format), run(torch.channels_last)
    model.body.to(memory_format=torch.channels_last)
    print(f"Conv4 width {width}, 100 images, train mode, forward + backward: NCHW {nchw:.1f} ms, channels-last "
          f"{last:.1f} ms ({nchw / last:.2f}x); max |output difference| {float((a - b).abs().max()):.1e}")


def intra_op_scaling(width: int = 64, image_size: int = 84, repeats: int = 3) -> None:
    """Conv4 forward + backward on a 5-way 1-shot episode of 80 RGB images at ``image_size``, 1 and 2 torch threads:
    wall and CPU seconds (a 2-core machine shared with other work says little about a cluster node)."""
    from uqcal.methods.fewshot.backbones import Conv4

    model = Conv4(3, width).train()
    images = torch.randn(80, 3, image_size, image_size)
    for threads in (1, 2):
        torch.set_num_threads(threads)
        model(images).sum().backward()  # warm-up
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(repeats):
            model.zero_grad()
            model(images).sum().backward()
        print(f"Conv4 width {width}, 80 x {image_size}x{image_size}x3, forward + backward, {threads} thread(s): "
              f"{(time.perf_counter() - wall) / repeats:.3f} s wall, {(time.process_time() - cpu) / repeats:.3f} CPU s")
    torch.set_num_threads(1)


def validation_check_cost(method, model, episodes: list) -> None:
    """One validation check (``collect_logits`` on ``episodes``) episode by episode and batched: seconds per
    episode (wall and CPU), and the largest difference of the two paths' logit samples."""
    from uqcal.methods.fewshot.base import validation_checks
    from uqcal.methods.fewshot.episodic import BATCH_IMAGES

    results = {}
    for label, batch in (("episode by episode", 0), (f"batched ({BATCH_IMAGES} images)", BATCH_IMAGES)):
        wall, cpu = time.perf_counter(), time.process_time()
        results[label] = method.collect_logits(model, episodes, torch.Generator().manual_seed(5), batch_images=batch)
        print(f"validation check, {type(method).__name__} {method.params.get('sampling', '')}, {label}: "
              f"{(time.perf_counter() - wall) / len(episodes):.4f} s/episode wall, "
              f"{(time.process_time() - cpu) / len(episodes):.4f} CPU s/episode")
    first, second = results.values()
    gap = max(float((a - b).abs().max()) for (a, _), (b, _) in zip(first, second, strict=True))
    print(f"  largest |logit sample difference| between the paths: {gap:.2e}")
    for shot, episodes_total in (("1-shot", 60_000), ("5-shot", 40_000)):
        before = len(validation_checks(episodes_total, 100)) * 600
        after = len(validation_checks(episodes_total, 100, 30, 100)) * 100
        print(f"  paper protocol, CUB {shot}: {before:,} validation episodes (paper.yaml before) -> {after:,} "
              f"(the authors' schedule), {before / after:.0f}x fewer")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--train-episodes", type=int, default=40)
    parser.add_argument("--test-episodes", type=int, default=5)
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--check-episodes", type=int, default=20, help="episodes of the timed validation check")
    parser.add_argument("--threads", action="store_true", help="also time Conv4 at 84 x 84 on 1 and 2 threads")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.threads:
        intra_op_scaling()
    backbone_layouts(args.width)
    torch.manual_seed(0)
    images, labels = digits28()

    def make_episode(spec):  # one episode's rows as tensors (labels: positions in spec["classes"])
        return episode_tensors(*EpisodeArrays(images, labels, [spec])[0], "cpu", 5, images.shape[1:])

    rows = class_rows(labels)
    rng = np.random.default_rng(0)
    train_classes, test_classes = [str(c) for c in range(5)], [str(c) for c in range(5, 10)]

    method = MirrorDescentGP({"width": args.width})
    method.counter = JitterCounter()
    model = method.build_model(5, 28)
    optimiser = torch.optim.Adam(method.param_groups(model))
    model.train()
    started = time.perf_counter()
    for _ in range(args.train_episodes):
        episode = make_episode(sample_fewshot_episode(rows, train_classes, 5, 5, 16, rng))
        optimiser.zero_grad()
        method.episode_loss(model, episode, None).backward()
        optimiser.step()
    train_rate = args.train_episodes / (time.perf_counter() - started)

    test = [
        make_episode(sample_fewshot_episode(rows, test_classes, 5, 5, 15, rng))
        for _ in range(args.test_episodes)
    ]
    model.eval()
    rows_out = []
    for sampling, n_samples in (("marginal", 256), ("marginal", 10000), ("full_covariance", 10000)):
        method.params.update(sampling=sampling, n_mc_samples=n_samples, n_mc_samples_full=n_samples)
        gen = torch.Generator().manual_seed(1)
        correct, total, seconds = 0, 0, 0.0
        for ep in test:
            ep: Episode
            t0 = time.perf_counter()
            with torch.no_grad():
                probs = mc_softmax(method.logit_samples(model, ep, gen))
            seconds += time.perf_counter() - t0
            correct += int((probs.argmax(1) == ep.query_y).sum())
            total += ep.query_y.numel()
        acc = correct / total
        se = np.sqrt(acc * (1 - acc) / total)
        rows_out.append((sampling, n_samples, seconds / len(test), acc, se))
    base = rows_out[-1][2]
    print(
        f"meta-training 5w5s, 16 queries/class, width {args.width}, 1 thread: {train_rate:.2f} episodes/s"
    )
    print(f"{'sampling':<16}{'samples':>8}{'s/episode':>11}{'speed-up':>10}{'acc':>8}{'±se':>7}")
    for sampling, n, sec, acc, se in rows_out:
        print(f"{sampling:<16}{n:>8}{sec:>11.3f}{base / sec:>9.1f}x{acc:>8.3f}{se:>7.3f}")
    print(f"jitter escalations (full-covariance Cholesky of Sigma): {method.counter.escalations}")
    checks = [make_episode(sample_fewshot_episode(rows, test_classes, 5, 5, 15, rng)) for _ in range(args.check_episodes)]
    method.params.update(sampling="marginal", n_mc_samples=256)
    validation_check_cost(method, model, checks)


if __name__ == "__main__":
    main()
