"""uqcal: reproducible uncertainty-calibration research pipeline."""

__version__ = "0.1.0"

# The library API: uqcal.metrics, uqcal.calibration (+ calibration_gmm, calibration_entropy), uqcal.gp,
# uqcal.data and uqcal.methods.<family>, each with its own __all__ (docs/api/).
__all__ = ["__version__"]
