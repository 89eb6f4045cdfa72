#!/usr/bin/env bash
# The GPU check: the GPU suite (`pytest -m gpu`) and the gpt2-small shape of zoo-bench, in one
# command, each inside its own time limit, with every log and figure written under $OUT
# (default ./gpu-check). Run from zoo's source directory on a machine with one CUDA GPU:
#
#   bash benchmarks/gpu_check.sh                      # SUITE_S=280 BENCH_S=300 seconds by default
#
# Arguments go to pytest (e.g. test ids to rerun). tests/cli/test_tracking.py (no GPU tests) needs
# mlflow, which GPU images often lack: it is left out.
# Prints the GPU, the versions, the suite's last lines and zoo-bench's Markdown table.
set -uo pipefail
out=${OUT:-gpu-check}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c "import torch, lightning, transformers; print('torch', torch.__version__, '| lightning', lightning.__version__, '| transformers', transformers.__version__)"
  date -u +%Y-%m-%d
} 2>&1 | tee "$out/gpu.txt"
timeout "${SUITE_S:-280}" python3 -m pytest -m gpu -n "${WORKERS:-8}" -q -p no:cacheprovider "$@" \
  --ignore=tests/cli/test_tracking.py --junitxml="$out/gpu-suite.xml" --durations=10 > "$out/gpu-suite.log" 2>&1
echo "gpu suite exit: $?"; tail -25 "$out/gpu-suite.log"
timeout "${BENCH_S:-300}" python3 -m zoo.cli.bench shape=gpt2-small variants="${VARIANTS:-bf16,bf16-compile}" \
  peers="${PEERS:-hf,x-transformers}" measure="${MEASURE:-train,generate}" rounds="${ROUNDS:-3}" \
  out="$out/gpt2-small.json" > "$out/gpt2-small.log" 2>&1
echo "zoo-bench exit: $?"; tail -40 "$out/gpt2-small.log"
