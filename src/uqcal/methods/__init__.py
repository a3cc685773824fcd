"""The methods, one package per family (``uqcal.methods.<family>``: its ``METHODS`` table and its public
classes and functions), and the honest reference predictors every family runs (``uqcal.methods.reference_predictors``)."""

__all__ = ["arena", "bo", "fewshot", "metareg", "qr", "reference_predictors", "rio"]  # submodules, imported when named
