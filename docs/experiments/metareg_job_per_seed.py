"""A metareg train job run the per-seed way (``train(ctx)`` seed after seed, as the pipeline does where a method
has no ``train_batch``), in one process like `uqcal train`, for before/after CPU (issue 53).
Run: PYTHONPATH=src .venv/bin/python docs/experiments/metareg_job_per_seed.py DATA_DIR RESULTS_DIR DATASET SETTING
METHOD"""

import resource
import sys
from pathlib import Path

from uqcal.core.numerics import activate

activate("portable")

from uqcal.pipeline.plan import Job, configured_job, train_seeds  # noqa: E402
from uqcal.pipeline.steps.train import evaluate_one, train_one  # noqa: E402

data_dir, results_dir, dataset, setting, method = sys.argv[1:6]
job = configured_job("config/config.yaml", Job("train", ("metareg", dataset, setting, method)))
runs = train_seeds(job, Path(results_dir), Path(data_dir))
for one in runs:
    evaluate_one(one.ctx, one.method, train_one(one.ctx, one.method))
usage = resource.getrusage(resource.RUSAGE_SELF)
print(f"per-seed job {dataset}/{setting}/{method}: {usage.ru_utime + usage.ru_stime:.1f} CPU s")
