"""The offline data layer: sources -> reshape -> data/raw/<name>.parquet + provenance JSON -> Table.

The datasets themselves (source registry, reshapes, ``materialise``, ``Table``, ``load_table``) live in
uqcal.data.datasets; the other modules are the readers, the sources, validation, splits and the BO objectives.
This package imports none of them until a public name is used (uqcal.core.lazy), so that importing
``uqcal.data.errors`` does not import pandas.
"""

from uqcal.core.lazy import lazy_getattr

# Public names (imported when used: uqcal.core.lazy). Code inside uqcal imports them from their modules, which
# the static import closure of a job (uqcal.pipeline.identity.source_files) follows.
_PUBLIC = {
    "SOURCE_MODULES": "uqcal.data.datasets:SOURCE_MODULES",
    "DataSourceError": "uqcal.data.errors:DataSourceError",
    "Table": "uqcal.data.datasets:Table",
    "apply_reshape": "uqcal.data.datasets:apply_reshape",
    "load_table": "uqcal.data.datasets:load_table",
    "materialise": "uqcal.data.datasets:materialise",
    "raw_paths": "uqcal.data.datasets:raw_paths",
}
__all__ = list(_PUBLIC)
__getattr__, __dir__ = lazy_getattr(__name__, _PUBLIC)
