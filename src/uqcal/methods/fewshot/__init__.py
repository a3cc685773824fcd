"""Methods of the `fewshot` family (MD-BFSC, Ke, Cao & Zhou). One module per method; see docs/fewshot.md."""

from uqcal.core.lazy import lazy_getattr
from uqcal.methods.api import Family, MethodEntry

_MD = "uqcal.methods.fewshot.md:MirrorDescentGP"

METHODS: dict[str, MethodEntry] = {
    "uniform": MethodEntry("uqcal.methods.fewshot.uniform:UniformClassifier"),
    # main table (Tables 1 and 2); every method also reports recalibrated ECE/MCE (temperature_scaling.py)
    "md": MethodEntry(_MD),
    "gd": MethodEntry(_MD, overrides={"inference": "gd"}),
    "dkt": MethodEntry("uqcal.methods.fewshot.dkt:DKT"),
    "protonet": MethodEntry("uqcal.methods.fewshot.protonet:ProtoNet"),
    "maml": MethodEntry("uqcal.methods.fewshot.maml:MAML"),
    # the authors' code: full-covariance MC (10,000 joint draws) and train step size 0.5
    "md_fullcov": MethodEntry(_MD, overrides={"sampling": "full_covariance"}),
    # Table 3 ablations (CUB 1-shot in the paper): train step size, kernel, train steps
    "md_rho0_01": MethodEntry(_MD, overrides={"rho_train": 0.01}),
    "md_rho0_1": MethodEntry(_MD, overrides={"rho_train": 0.1}),
    "md_rho0_5": MethodEntry(_MD, overrides={"rho_train": 0.5}),
    "md_rbf": MethodEntry(_MD, overrides={"kernel": "rbf"}),
    "md_cos": MethodEntry(_MD, overrides={"kernel": "cosine"}),  # the cross-domain kernel ablation
    "md_pol1": MethodEntry(_MD, overrides={"kernel": "polynomial", "polynomial_power": 1}),
    "md_pol2": MethodEntry(_MD, overrides={"kernel": "polynomial", "polynomial_power": 2}),
    "md_steps1": MethodEntry(_MD, overrides={"steps_train": 1}),
    "md_steps5": MethodEntry(_MD, overrides={"steps_train": 5}),
    "md_steps7": MethodEntry(_MD, overrides={"steps_train": 7}),
}


FAMILY = Family(
    title='fewshot: MD-BFSC (Ke et al.)',
    task="fewshot_classification",
    methods=METHODS,
    splitter="uqcal.data.splits:FEWSHOT",
    evaluator="uqcal.metrics.evaluation:score_classification",
    work="uqcal.methods.fewshot.work:work_per_seed",
)

# Public names (imported when used: uqcal.core.lazy); everything else in this package is internal.
_PUBLIC = {
    "MirrorDescentGP": "uqcal.methods.fewshot.md:MirrorDescentGP",
    "DKT": "uqcal.methods.fewshot.dkt:DKT",
    "ProtoNet": "uqcal.methods.fewshot.protonet:ProtoNet",
    "MAML": "uqcal.methods.fewshot.maml:MAML",
    "UniformClassifier": "uqcal.methods.fewshot.uniform:UniformClassifier",
    "FewShotClassifier": "uqcal.methods.fewshot.base:FewShotClassifier",
    "EpisodePredictive": "uqcal.methods.fewshot.base:EpisodePredictive",
    "ClassKernels": "uqcal.methods.fewshot.gp_core:ClassKernels",
    "run_mirror_descent": "uqcal.methods.fewshot.gp_core:run_mirror_descent",
    "softmax_expectations_fn": "uqcal.methods.fewshot.gp_core:softmax_expectations_fn",
    "site_predictive": "uqcal.methods.fewshot.gp_core:site_predictive",
    "predictive_logit_samples": "uqcal.methods.fewshot.gp_core:predictive_logit_samples",
    "mc_softmax": "uqcal.methods.fewshot.gp_core:mc_softmax",
}
__all__ = [
    "FAMILY",
    "METHODS",
    "MirrorDescentGP",
    "DKT",
    "ProtoNet",
    "MAML",
    "UniformClassifier",
    "FewShotClassifier",
    "EpisodePredictive",
    "ClassKernels",
    "run_mirror_descent",
    "softmax_expectations_fn",
    "site_predictive",
    "predictive_logit_samples",
    "mc_softmax",
]
__getattr__, __dir__ = lazy_getattr(__name__, _PUBLIC)
