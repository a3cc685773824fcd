"""Methods of the `bo` family. Add a method: one module here plus one line in METHODS."""

from uqcal.api import MethodEntry

METHODS: dict[str, MethodEntry] = {
    "random": MethodEntry("uqcal.methods.reference:RandomSearch"),
}
