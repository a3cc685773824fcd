"""Methods of the `qr` family (quantile regularisation; docs/qr.md). One module per method; variants and
ablations are config-free entries with fixed overrides."""

from uqcal.core.lazy import lazy_getattr
from uqcal.methods.api import Family, MethodEntry

_DVI = "uqcal.methods.qr.dvi:DropoutVI"
_DE = "uqcal.methods.qr.ensemble:DeepEnsemble"
_ISO = "uqcal.methods.qr.isotonic:IsotonicRecalibrated"
_LAMBDA = {"dvi": 1.0, "de": 5.0}  # Sec. 5.2
_TARGET = {"dvi": _DVI, "de": _DE}
CALIBRATION_FRACTION = 0.2

METHODS: dict[str, MethodEntry] = {
    "marginal": MethodEntry("uqcal.methods.reference_predictors:MarginalGaussian"),
}
for _base in ("dvi", "de"):
    _target, _lam = _TARGET[_base], _LAMBDA[_base]
    for _name, _qr_lam in ((_base, 0.0), (f"{_base}_qr", _lam)):
        # Tables 1-2: base and QR-trained models.
        METHODS[_name] = MethodEntry(_target, overrides={"lam": _qr_lam})
        # Tables 4-5: isotonic recalibration on the training PITs (the paper), reusing the trained model.
        METHODS[f"{_name}_iso"] = MethodEntry(_ISO, overrides={"fit_on": "train"}, depends_on=_name)
        # The (1, 1)-endpoint fix of Sec. 3 (no truncation).
        METHODS[f"{_name}_isofix"] = MethodEntry(
            _ISO, overrides={"fit_on": "train", "endpoint_fix": True}, depends_on=_name)
        # Better practice: a model trained without a held-out calibration part, recalibrated on that part.
        METHODS[f"{_name}_cal"] = MethodEntry(
            _target, overrides={"lam": _qr_lam, "calibration_fraction": CALIBRATION_FRACTION})
        METHODS[f"{_name}_isocal"] = MethodEntry(
            _ISO, overrides={"fit_on": "calibration"}, depends_on=f"{_name}_cal")
    # C.3: lambda in {1, ..., 5} at k = sqrt(n); C.4: k = t sqrt(n), t in {1, ..., 5}, at the default lambda.
    for _value in (0.5, 1, 2, 3, 4, 5, 10):
        if _value != _lam:
            _label = f"{_value:g}".replace(".", "p")  # dvi_qr_l0p5: method names stay dot-free (DVC)
            METHODS[f"{_base}_qr_l{_label}"] = MethodEntry(_target, overrides={"lam": float(_value)})
    for _t in (2, 3, 4, 5):
        METHODS[f"{_base}_qr_k{_t}"] = MethodEntry(
            _target, overrides={"lam": _lam, "k_multiplier": float(_t)})
    # Implementation choices the paper leaves open (docs/qr.md).
    # torch.sort instead of the authors' NeuralSort (the default, Alg. 1).
    METHODS[f"{_base}_qr_hardsort"] = MethodEntry(_target, overrides={"lam": _lam, "sort": "hard"})
    METHODS[f"{_base}_authorsvar"] = MethodEntry(_target, overrides={"lam": 0.0, "variance": "authors"})
# Deep Ensemble as the paper is written (real FGSM, lam on NLL + NLL_adv); ``de``/``de_qr`` run the authors' step.
METHODS["de_paper"] = MethodEntry(_DE, overrides={"lam": 0.0, "adversarial": "fgsm"})
METHODS["de_qr_paper"] = MethodEntry(_DE, overrides={"lam": _LAMBDA["de"], "adversarial": "fgsm"})


FAMILY = Family(
    title='qr: quantile regularization',
    task="single_task_regression",
    min_rows=20,
    min_rows_reason=("five folds (cv5) of fewer than 20 rows test each fold on fewer than 4, too few for the "
                     "calibration error and interval coverage it reports"),
    methods=METHODS,
    splitter="uqcal.data.splits:KFOLD",
    evaluator="uqcal.metrics.evaluation:score_regression",
    work="uqcal.methods.qr.work:work_per_seed",
)

# Public names (imported when used: uqcal.core.lazy); everything else in this package is internal.
_PUBLIC = {
    "DropoutVI": "uqcal.methods.qr.dvi:DropoutVI",
    "DeepEnsemble": "uqcal.methods.qr.ensemble:DeepEnsemble",
    "IsotonicRecalibrated": "uqcal.methods.qr.isotonic:IsotonicRecalibrated",
    "HeteroscedasticMLP": "uqcal.methods.qr.gaussian_nets:HeteroscedasticMLP",
    "train_member": "uqcal.methods.qr.gaussian_nets:train_member",
    "mixture_moments": "uqcal.methods.qr.gaussian_nets:mixture_moments",
    "QuantileRegularizer": "uqcal.methods.qr.entropy:QuantileRegularizer",
}
__all__ = [
    "FAMILY",
    "METHODS",
    "CALIBRATION_FRACTION",
    "DropoutVI",
    "DeepEnsemble",
    "IsotonicRecalibrated",
    "HeteroscedasticMLP",
    "train_member",
    "mixture_moments",
    "QuantileRegularizer",
]
__getattr__, __dir__ = lazy_getattr(__name__, _PUBLIC)
