"""The run configuration, one module per concern (import from the module; this package re-exports nothing):

``source``     the config files: plain-YAML reading, the raw checks (no YTE template), ``extends:`` composition,
               the cluster-profile check; ``ConfigError``
``load``       ``load_config`` / ``prepare_config``: a config file, or its composed data, validated and resolved
``schema``     the JSON schema (workflow/schemas/config.schema.yaml)
``semantics``  cross-references a schema cannot express: datasets, kinds, methods, their parameters
``registry``   the dataset registry (``dataset_registry`` files overlaid by the config's own ``datasets``)
``runs``       the runs a config plans: ``Run``, ``Batch``, ``iter_runs``, ``iter_batches``, ``seeds_for``, ...
``payloads``   the resolved slice of config each job runs from (``split_job``, ``run_job``, ``batch_job``, ...)

The same functions serve the Snakefile (which passes each job its resolved slice of the config) and the
command line (``uqcal ... --config FILE``), so both see exactly the same jobs.
"""

__all__: list[str] = []
