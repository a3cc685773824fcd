"""`uqcal materialise`: fetch or build one registry dataset into data/raw/<name>.parquet (+ provenance .json)."""

from __future__ import annotations

import logging

from uqcal.pipeline.locks import running

LOG = logging.getLogger("uqcal")


def run(args) -> int:
    from uqcal.data.datasets import materialise

    with running(args, "materialise", (args.dataset,)) as spec:
        job = spec["job"]
        path, record = materialise(job["dataset"], job["spec"], data_dir=args.data_dir)
        LOG.info("materialised %s: %d rows x %d columns -> %s", job["dataset"], record["rows"], record["columns"], path)
    return 0
