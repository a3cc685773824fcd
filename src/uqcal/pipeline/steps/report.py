"""`uqcal report`: reports/index.html and one page per family (tables, figures, claims, provenance)."""

from __future__ import annotations

from pathlib import Path

from uqcal.pipeline.locks import running
from uqcal.pipeline.plan import RECORDS


def run(args) -> int:
    from uqcal.pipeline.report.build import build_reports

    with running(args, "report", (), elsewhere=args.out != "reports") as spec:
        config_path = spec["config"]
        build_reports(
            config=spec["job"]["config"], config_path=config_path, results_dir=Path(args.results_dir),
            out_dir=Path(args.out), data_dir=Path(args.data_dir), records_dir=Path(RECORDS), jobs=args.jobs,
        )
    return 0
