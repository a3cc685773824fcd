"""Methods of the `fewshot` family. Add a method: one module here plus one line in METHODS."""

from uqcal.api import MethodEntry

METHODS: dict[str, MethodEntry] = {
    "uniform": MethodEntry("uqcal.methods.reference:UniformClassifier"),
}
