"""Methods of the `rio` family. Add a method: one module here plus one line in METHODS.

RIO = R+IO; variants named as in the paper's Table 1: R+I, R+O, Y+O, Y+IO and SVGP (= Y+I). Every GP
method reuses the network of `nn` from the same run (depends_on). Every GP fits raw targets, as the authors'
code does. Ours, run beside them as labelled ablations: `rio_ys` (RIO whose output kernel reads the standardised
network output; the authors feed raw y_hat), `rio_std` and `svgp_std` (RIO and SVGP on standardised targets).
"""

from uqcal.core.lazy import lazy_getattr
from uqcal.methods.api import Family, MethodEntry

_GP = "uqcal.methods.rio.rio:ResidualIOGP"

METHODS: dict[str, MethodEntry] = {
    "marginal": MethodEntry("uqcal.methods.reference_predictors:MarginalGaussian"),
    "nn": MethodEntry("uqcal.methods.rio.network:RioNetwork"),
    "rio": MethodEntry(_GP, overrides={"target": "residual", "kernel_inputs": "io"}, depends_on="nn"),
    "rio_ys": MethodEntry(
        _GP, overrides={"target": "residual", "kernel_inputs": "io", "standardise_yhat": True}, depends_on="nn"
    ),
    "rio_std": MethodEntry(_GP, overrides={"target": "residual", "kernel_inputs": "io", "scale_targets": True,
                                           "centre_targets": True}, depends_on="nn"),
    "svgp_std": MethodEntry(_GP, overrides={"target": "y", "kernel_inputs": "i", "scale_targets": True,
                                            "centre_targets": True}, depends_on="nn"),
    "r_i": MethodEntry(_GP, overrides={"target": "residual", "kernel_inputs": "i"}, depends_on="nn"),
    "r_o": MethodEntry(_GP, overrides={"target": "residual", "kernel_inputs": "o"}, depends_on="nn"),
    "y_o": MethodEntry(_GP, overrides={"target": "y", "kernel_inputs": "o"}, depends_on="nn"),
    "y_io": MethodEntry(_GP, overrides={"target": "y", "kernel_inputs": "io"}, depends_on="nn"),
    "svgp": MethodEntry(_GP, overrides={"target": "y", "kernel_inputs": "i"}, depends_on="nn"),
}


FAMILY = Family(
    title='rio: RIO (Qiu et al.)',
    task="single_task_regression",
    min_rows=20,
    min_rows_reason=("a holdout split (test_fraction 0.2) of fewer than 20 rows tests on fewer than 4, too few for "
                     "the 95 % interval coverage, NLPD or a calibration curve to mean anything"),
    methods=METHODS,
    splitter="uqcal.data.splits:HOLDOUT",
    evaluator="uqcal.metrics.evaluation:score_regression_at_rounded_z",
    work="uqcal.methods.rio.work:work_per_seed",
)

# Public names (imported when used: uqcal.core.lazy); everything else in this package is internal.
_PUBLIC = {
    "RioNetwork": "uqcal.methods.rio.network:RioNetwork",
    "ResidualIOGP": "uqcal.methods.rio.rio:ResidualIOGP",
    "train_network": "uqcal.methods.rio.network:train_network",
    "network_predict": "uqcal.methods.rio.network:network_predict",
    "fit_and_predict": "uqcal.methods.rio.rio:fit_and_predict",
    "fit_svgp": "uqcal.methods.rio.svgp:fit_svgp",
}
__all__ = [
    "FAMILY",
    "METHODS",
    "RioNetwork",
    "ResidualIOGP",
    "train_network",
    "network_predict",
    "fit_and_predict",
    "fit_svgp",
]
__getattr__, __dir__ = lazy_getattr(__name__, _PUBLIC)
