"""Methods of the `metareg` family. Add a method: one module here plus one line in METHODS."""

from uqcal.api import MethodEntry

METHODS: dict[str, MethodEntry] = {
    "marginal": MethodEntry("uqcal.methods.reference:MarginalGaussian"),
}
