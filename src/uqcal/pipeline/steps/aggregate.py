"""`uqcal aggregate`: a family's metrics.json files -> results/<family>/runs.parquet and summary.csv."""

from __future__ import annotations

import logging
from pathlib import Path

from uqcal.pipeline.locks import running

LOG = logging.getLogger("uqcal")


def run(args) -> int:
    from uqcal.pipeline.layout import RunLayout
    from uqcal.pipeline.summary import aggregate_family

    with running(args, "aggregate", (args.family,), elsewhere=args.out is not None) as spec:
        job = spec["job"]
        out = Path(args.out) if args.out else RunLayout(args.results_dir).summary(job["family"])
        summary = aggregate_family(job["family"], job["family_config"], Path(args.results_dir), out)
        LOG.info("aggregated %d rows -> %s (and %s beside it)", len(summary), out, out.with_name(RunLayout.RUNS))
    return 0
