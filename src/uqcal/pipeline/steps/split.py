"""`uqcal split`: every seed's split of one (family, dataset, setting) into data/splits/.../seed<k>.json."""

from __future__ import annotations

import logging
from pathlib import Path

from uqcal.pipeline.locks import running

LOG = logging.getLogger("uqcal")


def run(args) -> int:
    if args.seed is not None:  # one seed, for people: not a pipeline job, so no record
        from uqcal.pipeline.config.load import load_config
        from uqcal.pipeline.config.payloads import split_job

        _write(args, [split_job(load_config(args.config or "config/config.yaml"), args.family, args.dataset,
                                args.setting, args.seed)])
        return 0
    if args.out:
        raise SystemExit("uqcal split: --out needs --seed")
    with running(args, "split", (args.family, args.dataset, args.setting)) as spec:
        from uqcal.pipeline.config.payloads import per_seed_jobs

        _write(args, per_seed_jobs(spec["job"]))
    return 0


def _write(args, jobs: list[dict]) -> None:
    from uqcal.core.io import write_json
    from uqcal.data.datasets import load_table
    from uqcal.methods.api import get_family, register_job_family
    from uqcal.pipeline.layout import RunLayout

    layout = RunLayout(data=args.data_dir)
    first = jobs[0]
    table = load_table(first["dataset"], spec=first["dataset_spec"], raw_path=layout.raw_files(first["dataset"])[0])
    register_job_family(first)
    family = get_family(first["family"])
    if len(table.frame) < family.min_rows:
        from uqcal.data.validate import DataValidationError

        raise DataValidationError(f"dataset {first['dataset']!r} has {len(table.frame)} rows; family "
                                  f"{first['family']} needs at least {family.min_rows}: {family.min_rows_reason}")
    for one in jobs:
        register_job_family(one)
        split = get_family(one["family"]).load_splitter()(table, one["split_params"], one["seed"])
        split.update({"family": one["family"], "dataset": one["dataset"], "seed": one["seed"]})
        out = Path(args.out) if args.out else layout.split_path(one["family"], one["dataset"], one["setting"], one["seed"])
        write_json(out, split)
        LOG.info("split %s/%s/%s seed %d -> %s", one["family"], one["dataset"], one["setting"], one["seed"], out)
