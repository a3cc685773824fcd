"""uqcal: reproducible uncertainty-calibration research pipeline."""

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

__version__ = "0.1.0"

# The library API: uqcal.metrics, uqcal.core.calibration, uqcal.core.gp, uqcal.data and uqcal.methods.<family>,
# each with its own __all__ (docs/api/). The layers are the sub-packages (docs/ARCHITECTURE.md).
__all__ = ["__version__"]

# Modules of the library API that moved when the source tree became its layers (issue 22). The old paths
# still import (the same module object, with a DeprecationWarning), submodules included: uqcal.gp.linalg.
# Relative to the package (full "uqcal.x" strings would count as imports: uqcal.pipeline.identity.source_files).
MOVED = {
    "calibration": "core.calibration",
    "calibration_gmm": "methods.metareg.gmm_cdf",
    "calibration_entropy": "methods.qr.entropy",
    "gp": "core.gp",
    "stats": "metrics.stats",
    "objectives": "data.objectives",
    "splits": "data.splits",
    "api": "methods.api",
    "report": "pipeline.report",
    "evaluation": "metrics.evaluation",
    "io": "core.io",
    "device": "core.device",
    "nn": "core.nn",
    "resume": "core.resume",
    "_lazy": "core.lazy",
}


def _new_name(name: str) -> str | None:
    package, _, rest = name.partition(".")
    if package != __name__:
        return None
    for old, new in MOVED.items():
        if rest == old or rest.startswith(old + "."):
            return f"{package}.{new}{rest[len(old):]}"
    return None


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finder and loader of the old paths: the module is the one at its new path."""

    def find_spec(self, fullname, path=None, target=None):
        new = _new_name(fullname)
        return importlib.util.spec_from_loader(fullname, self) if new is not None else None

    def create_module(self, spec):
        new = _new_name(spec.name)
        warnings.warn(f"{spec.name} moved to {new}", DeprecationWarning, stacklevel=2)
        return importlib.import_module(new)

    def exec_module(self, module):
        pass  # already executed under its new name


if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
    sys.meta_path.insert(0, _MovedModules())  # before the path finder: uqcal.gp.linalg is not loaded twice
