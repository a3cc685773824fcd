"""Methods of the `bo` family (Deshpande & Kuleshov). Add a method: one module here plus one line in METHODS.

`random` is this family's paired random search (same initial design as the BO methods, same metrics);
it replaces the spine's reference `uqcal.methods.reference:RandomSearch` for this family.
"""

from uqcal.api import MethodEntry

_BO = "uqcal.methods.bo.calibrated:CalibratedBO"

METHODS: dict[str, MethodEntry] = {
    "random": MethodEntry("uqcal.methods.bo.calibrated:RandomSearchBO"),
    "uncalibrated": MethodEntry(_BO, overrides={"calibrate": False}),
    "calibrated": MethodEntry(_BO, overrides={"calibrate": True}),
    # ablations / options of the issue
    "calibrated_quantile": MethodEntry(_BO, overrides={"calibrate": True, "calibrated_acq": "quantile"}),
    "calibrated_gprecal": MethodEntry(_BO, overrides={"calibrate": True, "recalibrator": "gp"}),
    "calibrated_timeseries": MethodEntry(_BO, overrides={"calibrate": True, "pit_mode": "timeseries"}),
    "calibrated_refit": MethodEntry(_BO, overrides={"calibrate": True, "pit_mode": "loo_refit"}),
}
