"""The fewshot estimators on arrays: parameter and label checks, the columns of a prediction, validation drawn from
a pool, and the class docstrings' examples."""

from __future__ import annotations

import doctest
import importlib

import numpy as np
import pytest
import torch

from tests.methods.fewshot.protocol_cases import class_images, episode
from uqcal.core.predictive import NotFittedError
from uqcal.methods.api import ParameterError
from uqcal.methods.fewshot import DKT, MAML, MirrorDescentGP, ProtoNet, UniformClassifier

torch.set_num_threads(1)
SHAPE = {"n_way": 3, "k_shot": 1, "n_query": 4}


@pytest.fixture(scope="module")
def pools():
    rng = np.random.default_rng(1)
    base = class_images(rng, n_classes=5, per_class=6, first_label=0)
    val = class_images(rng, n_classes=4, per_class=6, first_label=20)
    new = class_images(rng, n_classes=3, per_class=6, first_label=40)
    return base, val, episode(*new, rng, k_shot=1, n_query=4)


@pytest.mark.parametrize("module", ["md", "dkt", "protonet", "maml", "uniform"])
def test_class_docstring_examples_run(module):
    result = doctest.testmod(importlib.import_module(f"uqcal.methods.fewshot.{module}"))
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize(("kwargs", "names"), [
    ({"train_episode": 5}, ["train_episode", "did you mean 'train_episodes'"]),
    ({"train_episodes": 2.5}, ["train_episodes", "integer"]),
    ({"width": "big"}, ["width", "integer"]),
    ({"lr_backbone": -1e-3}, ["lr_backbone", "> 0"]),
    ({"val_every": -1}, ["val_every", ">= 0"]),
    ({"kernel": "cosin"}, ["kernel", "'cosine', 'rbf', 'polynomial'"]),
    ({"inference": "sgd"}, ["inference", "'md', 'gd'"]),
    ({"backbone": "resnet"}, ["backbone", "'conv4s'"]),
    ({"kernel": {"glyphs": "rbf", "omniglot": "linear"}}, ["kernel", "'linear'"]),  # a per-run mapping's values
])
def test_constructor_rejects_a_bad_parameter_naming_it(kwargs, names):
    with pytest.raises(ParameterError) as info:
        MirrorDescentGP(**kwargs)
    for name in names:
        assert name in str(info.value)


def test_dkt_checks_its_kernel_and_maml_its_inner_steps():
    with pytest.raises(ParameterError, match="DKT.kernel: expected one of"):
        DKT(kernel="linear")
    with pytest.raises(ParameterError, match="MAML.inner_steps_test"):
        MAML(inner_steps_test=0)


def test_float_labels_are_refused_naming_them(pools):
    (X, y), _, (X_support, y_support, X_query, _) = pools
    with pytest.raises(ValueError, match="y: class labels must be integers, got dtype float64"):
        ProtoNet(train_episodes=1, width=4).fit(X, y.astype(float), **SHAPE)
    model = ProtoNet(train_episodes=1, width=4).fit(X, y, **SHAPE)
    with pytest.raises(ValueError, match="y_support: class labels must be integers"):
        model.predict(X_support, y_support.astype(float), X_query)
    with pytest.raises(ValueError, match="y_support: class labels must be integers"):
        UniformClassifier().fit(X, y).predict(X_support, y_support.astype(float), X_query)


def test_predict_checks_fit_and_the_episode(pools):
    (X, y), _, (X_support, y_support, X_query, _) = pools
    with pytest.raises(NotFittedError):
        ProtoNet().predict(X_support, y_support, X_query)
    model = ProtoNet(train_episodes=1, width=4).fit(X, y, **SHAPE)
    two_way = y_support != y_support[0]
    with pytest.raises(ValueError, match="2 classes .* fitted for 3-way episodes"):
        model.predict(X_support[two_way], y_support[two_way], X_query)
    with pytest.raises(ValueError, match="X_query has 12x12 images, but the model was fitted on 16x16"):
        model.predict(X_support, y_support, X_query[:, :12, :12])
    with pytest.raises(ValueError, match="n_way must be an integer >= 2"):
        ProtoNet().fit(X, y, n_way=1)
    with pytest.raises(ValueError, match="kernel = .*mapping"):
        MirrorDescentGP(kernel={"glyphs": "rbf"}).fit(X, y, **SHAPE)


def test_columns_are_the_sorted_support_labels(pools):
    """Relabelling the support's classes in reverse order reverses the columns of a deterministic prediction."""
    (X, y), _, (X_support, y_support, X_query, y_query) = pools
    model = ProtoNet(train_episodes=2, width=4).fit(X, y, **SHAPE)
    prediction = model.predict(X_support, y_support, X_query)
    assert prediction.classes.tolist() == sorted(set(y_support.tolist())) == [40, 41, 42]
    reversed_labels = {40: 9, 41: 5, 42: 1}
    relabelled = model.predict(X_support, np.array([reversed_labels[v] for v in y_support]), X_query)
    assert relabelled.classes.tolist() == [1, 5, 9]
    np.testing.assert_allclose(relabelled.probs, prediction.probs[:, ::-1], rtol=1e-6)
    np.testing.assert_array_equal(prediction.labels(y_query), y_query - 40)


def test_a_validation_pool_gives_checkpoint_episodes_and_the_recalibrations(pools):
    (X, y), (X_val, y_val), (X_support, y_support, X_query, _) = pools
    model = ProtoNet(train_episodes=4, width=4, val_every=2, n_val_check=2).fit(
        X, y, (X_val, y_val), n_val_episodes=3, **SHAPE)
    assert model.stats_["n_val_episodes_recalibration"] == 3
    assert [episode for episode, _ in model.stats_["val_acc_curve"]] == [2, 4]
    prediction = model.predict(X_support, y_support, X_query)
    assert sorted(prediction.recalibrated) == ["nllts", "ts", "tsm"]
    for recalibrated in prediction.recalibrated.values():
        assert recalibrated.classes.tolist() == prediction.classes.tolist()
        # a temperature never changes a deterministic method's argmax
        np.testing.assert_array_equal(recalibrated.predicted_class(), prediction.predicted_class())
    without = ProtoNet(train_episodes=4, width=4, val_every=2).fit(X, y, **SHAPE)
    assert without.stats_["val_acc_curve"] == [] and without.predict(X_support, y_support, X_query).recalibrated == {}


def test_uniform_gives_one_over_c_to_the_support_classes(pools):
    (X, y), _, (X_support, y_support, X_query, _) = pools
    prediction = UniformClassifier().fit(X, y).predict(X_support, y_support, X_query)
    assert prediction.classes.tolist() == [40, 41, 42]
    np.testing.assert_array_equal(prediction.probs, np.full((len(X_query), 3), 1 / 3))
