"""The pipeline layer: what turns a config into artifacts.

``config`` (load, validate, expand into runs), ``layout`` (every path under results/ and data/), ``jobs`` (specs,
records, staleness), ``steps`` (one module per pipeline step, run by ``uqcal <step>``), ``aggregate``, ``report``
(the HTML reports over the results), ``dvc`` (dvc.yaml from the plan) and ``commands`` (the bookkeeping
subcommands). It may import every layer below it
(methods, data, metrics, core); nothing below imports it (docs/ARCHITECTURE.md, the import-linter contracts).
"""

__all__: list[str] = []
