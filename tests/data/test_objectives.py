"""Objectives: known optima at known minimisers, no lower value on a dense grid, search-space mapping,
the synthetic/hpo sources, and the hpo evaluation cache."""

import numpy as np
import pytest

from uqcal.data.objectives import Dimension, get_objective, make_synthetic
from uqcal.data.sources import hpo, synthetic

# Literature values (Surjanovic & Bingham's Virtual Library of Simulation Experiments; Forrester et al. 2008).
KNOWN = {
    ("forrester", None): (-6.02074, [[0.75725]]),
    ("sixhump", None): (-1.0316, [[0.0898, -0.7126], [-0.0898, 0.7126]]),
    ("ackley", 2): (0.0, [[0.0, 0.0]]),
    ("ackley", 5): (0.0, [[0.0] * 5]),
    ("alpine", 2): (0.0, [[0.0, 0.0]]),
    ("alpine", 5): (0.0, [[0.0] * 5]),
    ("branin", None): (0.397887, [[-np.pi, 12.275], [np.pi, 2.275], [9.42478, 2.475]]),
    ("hartmann6", None): (-3.32237, [[0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573]]),
}


@pytest.mark.parametrize("name,dim", list(KNOWN))
def test_known_optimum_at_known_minimisers(name, dim):
    value, minimisers = KNOWN[(name, dim)]
    objective = make_synthetic(name, dim)
    assert objective.optimum_value == pytest.approx(value, abs=1e-4)
    np.testing.assert_allclose(objective(np.array(minimisers)), value, atol=1e-4)
    # No point of a random cloud (plus a dense grid in 1-D/2-D) beats the optimum.
    rng = np.random.default_rng(0)
    u = rng.uniform(size=(20000, objective.dim))
    if objective.dim <= 2:
        axes = np.meshgrid(*[np.linspace(0, 1, 401)] * objective.dim)
        u = np.vstack([u, np.stack([a.ravel() for a in axes], axis=1)])
    assert objective(objective.to_native(u)).min() >= value - 1e-4


def test_forrester_local_minimum_is_the_trap():
    objective = make_synthetic("forrester")
    x = np.linspace(0.0, 0.5, 5001)[:, None]
    values = objective(x)
    assert x[np.argmin(values), 0] == pytest.approx(0.1426, abs=1e-3)
    assert values.min() == pytest.approx(-0.98633, abs=1e-4)


def test_dimension_mapping_rounds_discrete_and_log():
    batch = Dimension("batch", 32, 512, "integer", step=32)
    assert batch.to_native(np.array([0.0, 0.51, 1.0])).tolist() == [32, 288, 512]
    lr = Dimension("lr", 1e-7, 1e-1, "log")
    assert lr.to_native(np.array([0.5]))[0] == pytest.approx(10 ** -4)
    kappa = Dimension("kappa", 0.5, 1.0, step=0.1)
    assert kappa.to_native(np.array([0.33]))[0] == pytest.approx(0.7)
    size = Dimension("size", 1, 128, "log_integer")
    assert size.to_native(np.array([0.5]))[0] == pytest.approx(11.0)  # round(sqrt(128))
    np.testing.assert_allclose(lr.to_unit(lr.to_native(np.array([0.3]))), [0.3])


def test_sources_describe_the_search_space(tmp_path):
    frame, provenance = synthetic.load({"type": "synthetic", "objective": "ackley", "dim": 5},
                                       name="ackley5", cache_dir=tmp_path)
    assert len(frame) == 5 and set(frame["lower"]) == {-32.768}
    assert provenance["optimum_value"] == 0.0 and provenance["rows"] == 5
    lda_spec = {"type": "hpo", "model": "lda", "data": "digits"}
    frame, provenance = hpo.load(lda_spec, name="lda", cache_dir=tmp_path)
    assert frame["name"].tolist() == ["batch_size", "learning_decay", "learning_offset"]
    with pytest.raises(ValueError, match="model"):
        hpo.load({"type": "hpo", "model": "svm", "data": "digits"}, name="x", cache_dir=tmp_path)


def test_hpo_evaluations_are_cached_in_memory_and_on_disk(tmp_path):
    spec = {"type": "hpo", "model": "gbm", "data": "concrete"}
    objective = get_objective(spec, cache_dir=tmp_path)
    function = objective.function
    u = objective.snap(np.array([[0.6, 0.3, 0.4, 0.2]]))
    first = objective(objective.to_native(u))
    assert function.n_trained == 1 and first[0] > 0
    # A cube point that differs only inside the rounding of the discrete dimensions is the same configuration.
    nudged = u + np.array([[0.0, 1e-3, -1e-3, 0.0]])
    np.testing.assert_array_equal(objective.to_native(nudged), objective.to_native(u))
    repeat = objective(objective.to_native(nudged))
    assert function.n_trained == 1 and function.n_cache_hits == 1
    assert repeat[0] == first[0]
    assert len(list((tmp_path / "hpo" / "gbm-concrete").glob("*.json"))) == 1
    fresh = get_objective(spec, cache_dir=tmp_path)  # a new run reads the disk cache and trains nothing
    assert fresh(fresh.to_native(u))[0] == first[0]
    assert fresh.function.n_trained == 0 and fresh.function.n_cache_hits == 1
    other = objective(objective.to_native(np.array([[0.1, 0.3, 0.4, 0.2]])))  # a new configuration trains
    assert function.n_trained == 2 and other[0] != first[0]
