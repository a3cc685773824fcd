"""Auto-generated reports over the artifact contract (results/<family>/summary.csv, metrics.json)."""

from uqcal._lazy import lazy_getattr

# Public names (imported when used: the report's modules import matplotlib; uqcal.config imports one of them).
_PUBLIC = {
    "build_reports": "uqcal.report.build:build_reports",
    "Provenance": "uqcal.report.provenance:Provenance",
    "collect_provenance": "uqcal.report.provenance:collect",
}
__all__ = ["Provenance", "build_reports", "collect_provenance"]
__getattr__, __dir__ = lazy_getattr(__name__, _PUBLIC)
