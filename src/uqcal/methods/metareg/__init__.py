"""Methods of the `metareg` family (Iwata & Kumagai). Add a method: one module here plus one line in METHODS.

Every method is an estimator: ``fit(tasks)`` with tasks a sequence of ``(X_t, y_t)``, then
``predict(X_support, y_support, X_query)`` -> a predictive object (uqcal.core.predictive) in the targets' units.

Every variant/ablation is a MethodEntry override of one class; docs/metareg.md explains each.
"""

from uqcal.core.lazy import lazy_getattr
from uqcal.methods.api import Family, MethodEntry

_METACAL = "uqcal.methods.metareg.metacal:MetaCal"
_SINGLE = "uqcal.methods.metareg.neural:SingleTaskNet"
_MAML = "uqcal.methods.metareg.neural:MamlNet"
_POOLED = "uqcal.methods.metareg.neural:PooledNet"
_GAUSSIAN_GP = {"objective": "nll", "calibration": "none"}

METHODS: dict[str, MethodEntry] = {
    "marginal": MethodEntry("uqcal.methods.metareg.marginal:TaskMarginalGaussian"),
    # Table 1-3: the proposed method and the baselines
    "metacal": MethodEntry(_METACAL),
    "mdkl": MethodEntry(_METACAL, overrides=_GAUSSIAN_GP),
    "gp": MethodEntry(
        _METACAL,
        overrides={**_GAUSSIAN_GP, "kernel_net": False, "mean_net": False, "learn_outputscale": True},
    ),
    "np": MethodEntry("uqcal.methods.metareg.np:NeuralProcess"),
    "sqr": MethodEntry(_SINGLE, overrides={"head": "sqr"}),
    "ng": MethodEntry(_SINGLE, overrides={"head": "ng"}),
    "bd": MethodEntry(_SINGLE, overrides={"head": "bd"}),
    "msqr": MethodEntry(_MAML, overrides={"head": "sqr"}),
    "mng": MethodEntry(_MAML, overrides={"head": "ng"}),
    "mbd": MethodEntry(_MAML, overrides={"head": "bd"}),
    # Table 4: ablations of metacal
    "wo_net": MethodEntry(_METACAL, overrides={"kernel_net": False, "mean_net": False}),
    "wo_r": MethodEntry(_METACAL, overrides={"calibration": "none"}),
    "wo_lc": MethodEntry(_METACAL, overrides={"lam": 1.0}),
    "wo_mix": MethodEntry(_METACAL, overrides={"mix": 0.0}),
    "w_split": MethodEntry(_METACAL, overrides={"split_support": True}),
    "w_remp": MethodEntry(_METACAL, overrides={"calibration": "emp"}),
    # Table 5: baselines trained on the pooled meta-training data
    "asqr": MethodEntry(_POOLED, overrides={"head": "sqr"}),
    "ang": MethodEntry(_POOLED, overrides={"head": "ng"}),
    "abd": MethodEntry(_POOLED, overrides={"head": "bd"}),
    "agp": MethodEntry("uqcal.methods.metareg.agp:AGP"),
}

# Fig. 6: lambda sensitivity, lambda in {0.01, 0.1, 0.2, ..., 1.0} (metacal_l05 is metacal's default 0.5).
_LAMBDAS = {
    "l001": 0.01,
    "l01": 0.1,
    "l02": 0.2,
    "l03": 0.3,
    "l04": 0.4,
    "l05": 0.5,
    "l06": 0.6,
    "l07": 0.7,
    "l08": 0.8,
    "l09": 0.9,
    "l10": 1.0,
}
for _suffix, _lam in _LAMBDAS.items():
    METHODS[f"metacal_{_suffix}"] = MethodEntry(_METACAL, overrides={"lam": _lam})

# Fig. 5: TE against the number of meta-training tasks (a random subset of the split's training tasks).
for _n_tasks in (5, 10, 20, 40, 80, 160):
    METHODS[f"metacal_t{_n_tasks}"] = MethodEntry(_METACAL, overrides={"max_train_tasks": _n_tasks})


FAMILY = Family(
    title='metareg: Iwata & Kumagai',
    task="multitask_regression",
    methods=METHODS,
    splitter="uqcal.data.splits:MULTITASK",
    evaluator="uqcal.metrics.evaluation:score_episodes",
)

# Public names (imported when used: uqcal.core.lazy); everything else in this package is internal.
_PUBLIC = {
    "MetaCal": "uqcal.methods.metareg.metacal:MetaCal",
    "DeepKernelGP": "uqcal.methods.metareg.metacal:DeepKernelGP",
    "EpisodeData": "uqcal.methods.metareg.episodes:EpisodeData",
    "NeuralProcess": "uqcal.methods.metareg.np:NeuralProcess",
    "SingleTaskNet": "uqcal.methods.metareg.neural:SingleTaskNet",
    "MamlNet": "uqcal.methods.metareg.neural:MamlNet",
    "PooledNet": "uqcal.methods.metareg.neural:PooledNet",
    "AGP": "uqcal.methods.metareg.agp:AGP",
    "TaskMarginalGaussian": "uqcal.methods.metareg.marginal:TaskMarginalGaussian",
}
__all__ = [
    "FAMILY",
    "METHODS",
    "MetaCal",
    "DeepKernelGP",
    "EpisodeData",
    "NeuralProcess",
    "SingleTaskNet",
    "MamlNet",
    "PooledNet",
    "AGP",
    "TaskMarginalGaussian",
]
__getattr__, __dir__ = lazy_getattr(__name__, _PUBLIC)
