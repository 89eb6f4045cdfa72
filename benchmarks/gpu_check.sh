#!/usr/bin/env bash
# The GPU check: zoo-bench's gpt2-small shape (training, then generation) and the GPU suite
# (`pytest -m gpu`), in one command, each inside its own time limit, with every log and figure
# written under $OUT (default ./gpu-check). Speed figures come first: a lease that ends early
# still leaves them. Run from zoo's source directory on a machine with one CUDA GPU:
#
#   bash benchmarks/gpu_check.sh          # TRAIN_S=150 GEN_S=150 SUITE_S=240 seconds by default
#
# Where hydra-core is missing and .whl/ holds the wheels (../shared-style offline install), they
# are installed into a temporary site directory first. Arguments go to pytest (test ids or -k to
# rerun). tests/cli/test_tracking.py (no GPU tests) needs mlflow, which GPU images often lack:
# it is left out. Prints the GPU, the versions, zoo-bench's Markdown tables and the suite's end.
set -uo pipefail
out=${OUT:-gpu-check}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
if ! python3 -c "import hydra" 2>/dev/null && ls .whl/*.whl >/dev/null 2>&1; then
  site=$(mktemp -d)
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" .whl/*.whl || exit 1
  export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c "import torch, lightning, transformers; print('torch', torch.__version__, '| lightning', lightning.__version__, '| transformers', transformers.__version__)"
  date -u +%Y-%m-%d
} 2>&1 | tee "$out/gpu.txt"
bench() {  # name limit measure
  timeout "$2" python3 -m zoo.cli.bench shape="${SHAPE:-gpt2-small}" variants="${VARIANTS:-bf16,bf16-compile}" \
    peers="${PEERS:-hf,x-transformers}" measure="$3" rounds="${ROUNDS:-3}" ${BENCH_ARGS:-} \
    out="$out/$1.json" > "$out/$1.log" 2>&1
  echo "zoo-bench $1 exit: $?"; grep -E '^\|' "$out/$1.log" || tail -15 "$out/$1.log"
}
bench train "${TRAIN_S:-150}" train
bench generate "${GEN_S:-150}" generate
timeout "${SUITE_S:-240}" python3 -m pytest -m gpu -n "${WORKERS:-8}" -q -p no:cacheprovider "$@" \
  --ignore=tests/cli/test_tracking.py --junitxml="$out/gpu-suite.xml" --durations=10 > "$out/gpu-suite.log" 2>&1
echo "gpu suite exit: $?"; tail -25 "$out/gpu-suite.log"
