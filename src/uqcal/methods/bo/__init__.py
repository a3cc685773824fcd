"""Methods of the `bo` family (Deshpande & Kuleshov). Add a method: one module here plus one line in METHODS.

`random` is this family's paired random search (same initial design as the BO methods, same metrics);
it replaces the spine's reference `uqcal.methods.reference_predictors:RandomSearch` for this family.

`calibrated` is the paper's procedure: leave-one-out PIT values from GPs retrained on each split
(Algorithm 4), a GP recalibrator (Sec. 5) and the acquisition rule of ``acquisition.py`` (recalibrated
quantile for UCB, moment-matched Gaussian for EI/PI). Each ablation changes one or two of those parts.
"""

from uqcal.core.lazy import lazy_getattr
from uqcal.methods.api import Family, MethodEntry

_BO = "uqcal.methods.bo.calibrated:CalibratedBO"

METHODS: dict[str, MethodEntry] = {
    "random": MethodEntry("uqcal.methods.bo.calibrated:RandomSearchBO"),
    "uncalibrated": MethodEntry(_BO, overrides={"calibrate": False}),
    "calibrated": MethodEntry(_BO, overrides={"calibrate": True}),
    # ablations: closed-form LOO with the full-data hyperparameters instead of refits
    "calibrated_fastloo": MethodEntry(_BO, overrides={"calibrate": True, "pit_mode": "closed_loo"}),
    # isotonic R and the least-squares sigma slope (mean shift dropped) instead of the GP R and matched rule
    "calibrated_isoslope": MethodEntry(_BO, overrides={"calibrate": True, "recalibrator": "isotonic",
                                                       "calibrated_acq": "sigma"}),
    # both: the previous default (closed-form LOO, isotonic R, sigma slope)
    "calibrated_legacy": MethodEntry(_BO, overrides={"calibrate": True, "pit_mode": "closed_loo",
                                                     "recalibrator": "isotonic", "calibrated_acq": "sigma"}),
    # options
    "calibrated_quantile": MethodEntry(_BO, overrides={"calibrate": True, "calibrated_acq": "quantile"}),
    "calibrated_timeseries": MethodEntry(_BO, overrides={"calibrate": True, "pit_mode": "timeseries"}),
}


# Keys of `split:` and the settings that the BO loop reads (uqcal.methods.bo.calibrated.setting), beside the
# initial design's (uqcal.data.splits.INITIAL_DESIGN).
SETTING_KEYS = {
    "initial_box": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}, "minItems": 2,
                    "maxItems": 2},
    "acquisition": {"enum": ["ei", "pi", "ucb"]},
    "budget": {"type": "integer", "minimum": 1},
    "target_tol": {"type": "number", "exclusiveMinimum": 0},
    "stuck_above": {"type": ["number", "null"]},
}

FAMILY = Family(
    title='bo: calibrated BO (Deshpande & Kuleshov)',
    task="optimisation_objective",
    methods=METHODS,
    splitter="uqcal.data.splits:INITIAL_DESIGN",
    evaluator="uqcal.metrics.evaluation:score_trace",
    setting_keys=SETTING_KEYS,
    work="uqcal.methods.bo.work:work_per_seed",
)

# Public names (imported when used: uqcal.core.lazy); everything else in this package is internal.
_PUBLIC = {
    "CalibratedBO": "uqcal.methods.bo.calibrated:CalibratedBO",
    "RandomSearchBO": "uqcal.methods.bo.calibrated:RandomSearchBO",
    "BOResult": "uqcal.methods.bo.calibrated:BOResult",
    "CalibratedAcquisition": "uqcal.methods.bo.acquisition:CalibratedAcquisition",
    "RecalibrationMap": "uqcal.methods.bo.pit_recalibrator:RecalibrationMap",
    "fit_recalibration": "uqcal.methods.bo.pit_recalibrator:fit_recalibration",
    "fit_gp": "uqcal.methods.bo.surrogate:fit_gp",
    "heldout_pit": "uqcal.methods.bo.surrogate:heldout_pit",
}
__all__ = [
    "FAMILY",
    "METHODS",
    "CalibratedBO",
    "RandomSearchBO",
    "BOResult",
    "CalibratedAcquisition",
    "RecalibrationMap",
    "fit_recalibration",
    "fit_gp",
    "heldout_pit",
]
__getattr__, __dir__ = lazy_getattr(__name__, _PUBLIC)
