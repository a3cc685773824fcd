"""A Gaussian predictive converts to skpro's Normal and back, and skpro's metrics score it as uqcal's do."""

from __future__ import annotations

import numpy as np
import pytest

from uqcal.core.interop import from_skpro, to_skpro
from uqcal.core.predictive import GaussianPredictive
from uqcal.metrics import all_metrics


def test_round_trip_and_the_same_scores():
    pytest.importorskip("skpro")
    import pandas as pd
    from skpro.metrics import CRPS, LogLoss

    rng = np.random.default_rng(0)
    prediction = GaussianPredictive(rng.normal(size=50), rng.uniform(0.5, 2.0, 50))
    y = rng.normal(size=50)
    distribution = to_skpro(prediction)
    back = from_skpro(distribution)
    np.testing.assert_array_equal(back.mean, prediction.mean)
    np.testing.assert_array_equal(back.std, prediction.std)
    ours = all_metrics(prediction, y)
    truth = pd.DataFrame({"y": y})
    assert CRPS()(truth, distribution) == pytest.approx(ours["crps"], rel=1e-6)
    assert LogLoss()(truth, distribution) == pytest.approx(ours["nlpd"], rel=1e-9)
    with pytest.raises(TypeError, match="GaussianPredictive converts"):
        to_skpro(back.__class__.__mro__[1])
