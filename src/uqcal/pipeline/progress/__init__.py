"""A run's progress line with an ETA, and its closing lines (issue 40).

``estimate``: each job's expected cost from earlier records (this checkout's, else the shipped
``reference_costs.yaml``). ``run``: the progress arithmetic, the watcher the Snakefile starts in ``onstart``, and
the report path and claims headline it prints in ``onsuccess``. ``python -m uqcal.pipeline.progress`` watches a
`dvc repro` from beside it and rewrites the reference table.
"""
