"""uqcal: reproducible uncertainty-calibration research pipeline."""

__version__ = "0.1.0"

# The library API: uqcal.metrics, uqcal.core.calibration, uqcal.core.gp, uqcal.data and uqcal.methods.<family>,
# each with its own __all__ (docs/api/). The layers are the sub-packages (docs/ARCHITECTURE.md).
__all__ = ["__version__"]
