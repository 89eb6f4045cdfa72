#!/usr/bin/env bash
# The GPU check, one command for a lent GPU: zoo-bench against Hugging Face and x-transformers
# (training for each shape), then greedy decoding at batch 1 and 8, eager and compiled with CUDA
# graphs, against Hugging Face's static compiled cache and gpt-fast-style decoding (GEN_PEERS),
# each batch-1 figure also as a share of the measured bandwidth limit and the GPU suite (`pytest -m gpu`, split over WORKERS processes; it holds the FSDP
# bf16 kill/resume tests), each inside its own time limit. Speed figures come first: a lease
# that ends early still leaves them. Every log goes under $OUT (default ./gpu-check); at the end
# benchmarks/gpu_summary.py writes one dated JSON record under benchmarks/results/gpu/ (or
# $RESULTS) and $OUT/summary.md for docs/performance.md, and prints it.
#
#   bash benchmarks/gpu_check.sh                          # everything (about 12 minutes on an H100)
#   PARTS="train:llama-250m suite" bash benchmarks/gpu_check.sh      # some parts (a second call)
#   TINY=1 bash benchmarks/gpu_check.sh                   # the plumbing on a CPU in a minute or two
#
# PARTS: train:SHAPE, generate:SHAPE (generate:llama-1b: the ~1B Llama-style model the bandwidth
# target is stated for), suite, and the layer benchmarks moe (benchmarks/moe_layer.py:
# the mixture's loop and grouped GEMM against dense and transformers' Mixtral block), sliding
# (benchmarks/sliding_mask.py at 4,096 and 16,384 tokens), slidetrain (benchmarks/sliding_train.py: a
# llama-preset training step at 16,384 tokens, full attention against sliding layers of 1,024 by
# kernel, compiled), docmask (benchmarks/document_mask.py,
# eager and compiled), options (the GPU tests of the 2025-26 options and of flash-linear-attention's
# Gated DeltaNet kernel, then benchmarks/linear_kernels.py; carry its wheels in .whl/) and profile
# (benchmarks/decode_profile.py: batch-1 compiled greedy decoding of GPT-2 small, its tokens/s and
# the profiler's tables of one call), run in the order given (default "train:gpt2-small generate:gpt2-small
# train:llama-250m suite"); limits TRAIN_S, GEN_S, SUITE_S, LAYER_S, SLIDE_S seconds. The suite is stopped
# with SIGINT at its limit, so its JUnit report still counts the tests that finished. Where hydra-core is missing and .whl/ holds the wheels (a machine with no package
# index), they are installed into a temporary site directory first. Arguments go to pytest
# (test ids or -k to rerun; default tests/gpu and tests/nn/test_moe.py, the files with GPU tests). tests/cli/test_tracking.py (no GPU tests) needs mlflow, which GPU
# images often lack: it is left out.
set -uo pipefail
out=${OUT:-gpu-check}
mkdir -p "$out"
: > "$out/status.txt"
export PYTHONUNBUFFERED=1
if ! python3 -c "import hydra" 2>/dev/null && ls .whl/*.whl >/dev/null 2>&1; then
  site=$(mktemp -d)
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" .whl/*.whl || exit 1
  export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
parts=${PARTS:-train:gpt2-small generate:gpt2-small train:llama-250m suite}
bench_args=(variants="${VARIANTS:-bf16,bf16-compile}" peers="${PEERS:-hf,x-transformers}" rounds="${ROUNDS:-3}")
gen_args=(variants="${VARIANTS:-bf16,bf16-compile}" rounds="${GEN_ROUNDS:-2}" new_tokens="${NEW_TOKENS:-128}"
          peers="${GEN_PEERS:-hf,gpt-fast}")
suite_args=(-m gpu -n "${WORKERS:-12}")
# the files that hold GPU tests: collecting the others would compose configs that need plugins the
# GPU image lacks (the Optuna sweeper), for no test
suite_paths=(tests/gpu tests/nn/test_moe.py)
suite_target=("$@")  # test ids or paths given: those; otherwise the GPU files, then any options
case " $* " in *" tests/"*) ;; *) suite_target=("${suite_paths[@]}" "$@") ;; esac
if [ -n "${TINY:-}" ]; then  # a CPU: the smallest model, one round, the suite's GPU tests all skip
  parts=${PARTS:-train:reference generate:reference suite}
  tiny=(device=cpu model.d_model=64 model.n_heads=2 model.n_layers=1 model.vocab_size=256 batch=2 seq_len=32 steps=1)
  bench_args=(variants=eager peers=hf rounds=1 "${tiny[@]}")
  gen_args=(variants=eager rounds=1 new_tokens=8 peers=hf "${tiny[@]}")
  suite_args=(-m gpu)
  suite_target=(tests/gpu/test_speed_cuda.py "$@")
fi
{
  if command -v nvidia-smi >/dev/null; then nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  else echo "no GPU (CPU), -, -"; fi
  # the installed versions from the packages' metadata: importing lightning and transformers only
  # to print them costs seconds (they are imported by the parts that use them)
  python3 -c "from importlib.metadata import version as v; print('torch', v('torch'), '| lightning', v('lightning'), '| transformers', v('transformers'))"
  date -u +%Y-%m-%d
} 2>&1 | tee "$out/gpu.txt"
for part in $parts; do
  kind=${part%%:*}; shape=${part#*:}
  case $kind in
    train)
      timeout "${TRAIN_S:-170}" python3 -m zoo.cli.bench shape="$shape" measure=train "${bench_args[@]}" \
        out="$out/train-$shape.json" > "$out/train-$shape.log" 2>&1 ;;
    generate)
      timeout "${GEN_S:-170}" python3 -m zoo.cli.bench shape="$shape" measure=generate "${gen_args[@]}" \
        out="$out/generate-$shape.json" > "$out/generate-$shape.log" 2>&1 ;;
    moe)
      timeout "${LAYER_S:-120}" python3 benchmarks/moe_layer.py --device cuda --activation swiglu --tokens 16384 \
        --d-model 1024 --d-ff 1024 --experts 8 --top-k 2 --rounds 7 --out "$out/moe-layer.json" > "$out/moe-layer.log" 2>&1 ;;
    sliding)
      { timeout "${LAYER_S:-120}" python3 benchmarks/sliding_mask.py 4096 512 7 \
        && timeout "${LAYER_S:-120}" python3 benchmarks/sliding_mask.py 16384 512 7; } > "$out/sliding.log" 2>&1 ;;
    slidetrain)
      timeout "${SLIDE_S:-200}" python3 benchmarks/sliding_train.py --seq-len 16384 --window 1024 --compile \
        --rounds 3 --out "$out/sliding-train.json" > "$out/sliding-train.log" 2>&1 ;;
    docmask)
      { timeout "${LAYER_S:-120}" python3 benchmarks/document_mask.py --batch 8 --seq-len 2048 --doc-len 256 \
          --rounds 3 --out "$out/docmask.json" \
        && timeout "${LAYER_S:-120}" python3 benchmarks/document_mask.py --batch 8 --seq-len 2048 --doc-len 256 \
          --rounds 3 --compile --out "$out/docmask-compile.json"; } > "$out/docmask.log" 2>&1 ;;
    options)
      { timeout -s INT -k 20 "${LAYER_S:-120}" python3 -m pytest -q -p no:cacheprovider -n "${OPTION_WORKERS:-8}" \
          tests/gpu/test_options_cuda.py tests/gpu/test_linear_kernels_cuda.py --junitxml="$out/options-suite.xml"
        timeout "${LAYER_S:-120}" python3 benchmarks/linear_kernels.py --contexts 2048 8192 --rounds 5 \
          --out "$out/linear_kernels.json"; } > "$out/options.log" 2>&1 ;;
    profile)
      timeout "${LAYER_S:-120}" python3 benchmarks/decode_profile.py --out "$out/profile" > "$out/decode_profile.log" 2>&1 ;;
    suite)
      timeout -s INT -k 30 "${SUITE_S:-220}" python3 -m pytest "${suite_args[@]}" -q -p no:cacheprovider "${suite_target[@]}" \
        --ignore=tests/cli/test_tracking.py --junitxml="$out/gpu-suite.xml" --durations=10 > "$out/gpu-suite.log" 2>&1 ;;
    *) echo "gpu_check: unknown part $part (train:SHAPE, generate:SHAPE, suite, moe, sliding, slidetrain, docmask, options, profile)"; exit 2 ;;
  esac
  code=$?
  echo "$part $code" | tr ':' '-' >> "$out/status.txt"
  echo "$part exit: $code"
done
python3 benchmarks/gpu_summary.py "$out" --results "${RESULTS:-benchmarks/results/gpu}"
