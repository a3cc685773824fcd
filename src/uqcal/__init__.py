"""uqcal: uncertainty calibration, as a library (predictive objects, metrics, recalibrators) and as a
reproducible research pipeline for five papers.

The base install (numpy, scipy, pandas, scikit-learn) serves the names below; ``uqcal[methods]`` adds the
methods (torch, gpytorch, botorch), ``uqcal[plots]`` the plots, ``uqcal[pipeline]`` the workflow and report.
The names are imported when first used, so ``import uqcal`` stays light.
"""

from uqcal.core.lazy import lazy_getattr

__version__ = "0.1.0"

_PUBLIC = {
    "GaussianPredictive": "uqcal.core.predictive:GaussianPredictive",
    "QuantilePredictive": "uqcal.core.predictive:QuantilePredictive",
    "CategoricalPredictive": "uqcal.core.predictive:CategoricalPredictive",
    "all_metrics": "uqcal.metrics:all_metrics",
    "IsotonicRecalibrator": "uqcal.core.recalibration:IsotonicRecalibrator",
    "VarianceScaling": "uqcal.core.recalibration:VarianceScaling",
    "TemperatureScaling": "uqcal.core.recalibration:TemperatureScaling",
}
# The sub-packages are the layers (docs/ARCHITECTURE.md), each with its own __all__ (docs/api/).
__all__ = ["__version__", *_PUBLIC]
__getattr__, __dir__ = lazy_getattr(__name__, _PUBLIC)
