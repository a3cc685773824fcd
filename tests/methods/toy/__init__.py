"""A toy family: uqcal's family plug-in contract end to end, from outside the uqcal package.

Nothing outside this folder names it: its config (``config.yaml`` here) points ``families.toy.package`` at this
package, and the pipeline finds its splitter, methods, evaluator, report page and "paper" numbers through
``FAMILY`` (uqcal.methods.api.Family). ``test_family.py`` runs it through the whole workflow.

The "paper" (``paper_numbers.yaml``) is a fixture, not a publication: numbers written for this test, labelled as such.
"""

from uqcal.methods.api import Family, MethodEntry

METHODS = {
    "marginal": MethodEntry("uqcal.methods.reference_predictors:MarginalGaussian"),
    "ridge": MethodEntry("tests.methods.toy.ridge:BayesianRidgeRegression"),
}

FAMILY = Family(
    title="toy: Bayesian ridge regression beside the marginal (a plug-in test)",
    task="single_task_regression",
    methods=METHODS,
    splitter="tests.methods.toy.split:SPLITTER",
    evaluator="tests.methods.toy.split:evaluate",
)
