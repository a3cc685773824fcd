"""Auto-generated reports over the artifact contract (results/<family>/summary.csv, metrics.json)."""
