"""Auto-generated reports over the artifact contract (results/<family>/runs.parquet and summary.csv, the runs' files)."""

from uqcal.core.lazy import lazy_getattr

# Public names (imported when used: the report's modules import matplotlib; uqcal.pipeline.config imports one of them).
_PUBLIC = {
    "build_reports": "uqcal.pipeline.report.build:build_reports",
    "Provenance": "uqcal.pipeline.report.provenance:Provenance",
    "collect_provenance": "uqcal.pipeline.report.provenance:collect",
}
__all__ = ["Provenance", "build_reports", "collect_provenance"]
__getattr__, __dir__ = lazy_getattr(__name__, _PUBLIC)
