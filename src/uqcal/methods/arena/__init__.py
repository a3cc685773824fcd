"""Methods of the `arena` family: every single-task regression method of uqcal on the same splits (docs/arena.md).

The entries point at the other families' classes by string (``module:Class``), so this package imports none
of them: the rio and qr methods run unchanged, on the arena's split (uqcal.methods.arena.split). Every
Gaussian method also runs recalibrated after the fact, fitted on the split's validation part, which no method
trains on: ``<method>_iso`` (isotonic, Kuleshov et al. 2018) and ``<method>_vs`` (one variance scale factor).
"""

from uqcal.core.lazy import lazy_getattr
from uqcal.methods.api import Family, MethodEntry

_RIO_GP = "uqcal.methods.rio.rio:ResidualIOGP"
_DVI = "uqcal.methods.qr.dvi:DropoutVI"
_DE = "uqcal.methods.qr.ensemble:DeepEnsemble"
_ISOTONIC = "uqcal.methods.arena.posthoc_recalibration:IsotonicOnValidation"
_VARIANCE_SCALING = "uqcal.methods.arena.posthoc_recalibration:VarianceScaling"

# The methods as their own families define them (the same overrides: rio's and qr's registries).
BASE_METHODS: dict[str, MethodEntry] = {
    "marginal": MethodEntry("uqcal.methods.reference_predictors:MarginalGaussian"),
    "nn": MethodEntry("uqcal.methods.rio.network:RioNetwork"),
    "rio": MethodEntry(_RIO_GP, overrides={"target": "residual", "kernel_inputs": "io"}, depends_on="nn"),
    "svgp": MethodEntry(_RIO_GP, overrides={"target": "y", "kernel_inputs": "i"}, depends_on="nn"),
    "dvi": MethodEntry(_DVI, overrides={"lam": 0.0}),
    "dvi_qr": MethodEntry(_DVI, overrides={"lam": 1.0}),  # QR Sec. 5.2
    "de": MethodEntry(_DE, overrides={"lam": 0.0}),
    "de_qr": MethodEntry(_DE, overrides={"lam": 5.0}),
}
# Gaussian predictive models that the recalibrations compose with (the reference stays as it is).
RECALIBRATED_BASES = ("nn", "rio", "svgp", "dvi", "dvi_qr", "de", "de_qr")
RECALIBRATIONS = {"iso": _ISOTONIC, "vs": _VARIANCE_SCALING}

METHODS: dict[str, MethodEntry] = dict(BASE_METHODS)
for _base in RECALIBRATED_BASES:
    for _suffix, _target in RECALIBRATIONS.items():
        METHODS[f"{_base}_{_suffix}"] = MethodEntry(_target, depends_on=_base)


FAMILY = Family(
    title='arena: every regression method on the same splits',
    task="single_task_regression",
    min_rows=20,
    min_rows_reason=("its splits test on a fifth of the rows; fewer than 20 rows leave fewer than 4 test rows, too "
                     "few for any calibration metric"),
    methods=METHODS,
    splitter="uqcal.methods.arena.split:SPLITTER",
    evaluator="uqcal.metrics.evaluation:score_test_part",
)

_PUBLIC = {
    "IsotonicOnValidation": _ISOTONIC,
    "VarianceScaling": _VARIANCE_SCALING,
}
__all__ = [
    "FAMILY",
    "METHODS",
    "BASE_METHODS",
    "RECALIBRATED_BASES",
    "RECALIBRATIONS",
    "IsotonicOnValidation",
    "VarianceScaling",
]
__getattr__, __dir__ = lazy_getattr(__name__, _PUBLIC)
