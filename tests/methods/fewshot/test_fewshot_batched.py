"""Validation episodes through the backbone in batches: the same logit samples as episode by episode (up to the
backbone's floating-point order), and the authors' checkpoint schedule (train.py) by hand."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.methods.fewshot.protocol_cases import class_images
from uqcal.methods.fewshot import DKT, MAML, MirrorDescentGP, ProtoNet
from uqcal.methods.fewshot.base import validation_checks

torch.set_num_threads(1)
SHAPE = {"n_way": 3, "k_shot": 2, "n_query": 3}
# Batch norm in eval mode and the convolutions treat each image alone: a batched pass differs from a per-episode
# one only in the order of float32 sums (~1e-7 relative in the features). The GP heads (a Cholesky of a kernel
# of a few points) can amplify that by the kernel's condition number; 1e-4 on logits bounds both here.
TOLERANCE = 1e-4


@pytest.mark.parametrize("make", [
    lambda: ProtoNet(train_episodes=3, width=8),
    lambda: DKT(train_episodes=3, width=8, n_pred_samples=16),
    lambda: MirrorDescentGP(train_episodes=3, width=8, kernel="cosine", n_pred_samples=16, n_mc_samples=16,
                            n_convergence_episodes=0),
    lambda: MirrorDescentGP(train_episodes=3, width=8, kernel="rbf", n_pred_samples=16, n_mc_samples=16,
                            sampling="full_covariance", n_mc_samples_full=64, n_convergence_episodes=0),
], ids=["protonet", "dkt", "md", "md_fullcov"])
def test_batched_validation_equals_episode_by_episode(make):
    rng = np.random.default_rng(3)
    X, y = class_images(rng, n_classes=5, per_class=6, first_label=0)
    pool = class_images(rng, n_classes=4, per_class=6, first_label=20)
    model = make().fit(X, y, **SHAPE)
    episodes = model._validation_episodes(pool, n_val_episodes=7, **SHAPE)

    def logits(batch_images):
        generator = model.runtime.torch_generator(offset=99)
        return model.collect_logits(model.model_, episodes, generator, batch_images=batch_images)

    one_by_one = logits(0)
    assert model.head_model(model.model_) is not None
    for batch_images in (30, 10_000):  # two episodes (of 15 images) a pass, then all seven in one
        batched = logits(batch_images)
        assert len(batched) == len(one_by_one) == 7
        for (samples, labels), (expected, expected_labels) in zip(batched, one_by_one, strict=True):
            assert samples.shape == expected.shape
            torch.testing.assert_close(samples, expected, rtol=TOLERANCE, atol=TOLERANCE)
            assert torch.equal(labels, expected_labels)


def test_maml_predicts_episode_by_episode():
    # MAML adapts the whole backbone to each support set (batch statistics): no batched backbone pass
    rng = np.random.default_rng(5)
    X, y = class_images(rng, n_classes=5, per_class=6, first_label=0)
    model = MAML(train_episodes=2, width=4).fit(X, y, **SHAPE)
    assert model.head_model(model.model_) is None


def test_the_authors_checkpoint_schedule_by_hand():
    # every epoch of 100 episodes; a last part-epoch is checked too
    assert validation_checks(1000, 100) == list(range(100, 1001, 100))
    assert validation_checks(1050, 100) == [*range(100, 1001, 100), 1050]
    # 10 epochs, every 3rd (e = 0, 3, 6, 9) and every epoch with e > 10 - 4 (7, 8, 9)
    assert validation_checks(1000, 100, sparse_every=3, dense_epochs=4) == [100, 400, 700, 800, 900, 1000]
    assert validation_checks(1000, 0) == []
    # the paper's CUB / mini-ImageNet runs: 600 epochs (1-shot): e = 0, 30, ..., 480 and 501..599; 400 (5-shot)
    assert len(validation_checks(60_000, 100, 30, 100)) == 17 + 99
    assert len(validation_checks(40_000, 100, 30, 100)) == 11 + 99


def test_a_fit_checks_on_the_schedule():
    rng = np.random.default_rng(4)
    X, y = class_images(rng, n_classes=5, per_class=6, first_label=0)
    pool = class_images(rng, n_classes=4, per_class=6, first_label=20)
    model = ProtoNet(train_episodes=10, width=4, val_every=2, n_val_check=2, val_sparse_every=2,
                     val_dense_epochs=2).fit(X, y, pool, n_val_episodes=2, **SHAPE)
    # 5 epochs of 2 episodes: e = 0, 2, 4 and e > 3 (4)
    assert [episode for episode, _ in model.stats_["val_acc_curve"]] == [2, 6, 10]
