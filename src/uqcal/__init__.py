"""uqcal: reproducible uncertainty-calibration research pipeline."""

__version__ = "0.1.0"
