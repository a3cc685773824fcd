"""Dataset sources: one module per ``source.type`` (uqcal.data.datasets.SOURCE_MODULES), each with
``load(spec, *, name, cache_dir, seed) -> (DataFrame, provenance)``, loaded by name."""

__all__: list[str] = []  # loaded by uqcal.data.datasets from the config's source type, not imported by name
