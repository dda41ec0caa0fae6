#!/bin/bash
# Prepared runs for a lent GPU machine (one H200, 16 cores; docs/gpu.md), each call bounded by a
# watchdog so that it ends inside one 10-minute device call. Lanes, all at once:
#   GPU_DEMO=1  rollalloc's own trainer on CUDA: a 2-step smoke, then the paper testbed's GRPO, lrQFp
#               and Pilot-Commit seed 0 from the cached default warm start (the policy the CPU runs
#               start from); beside it the same three on a 20M-parameter model (hidden 512, 6
#               layers; 32x the default; warm start built there), seeds 0 and 1.
#   GPU_WS=W    the paper testbed on warm start W on CUDA, GPU_LANES processes sharing the GPU, and
#               GRPO seed 0 of ws0 again (is the CUDA run repeatable?).
#   CPU_WS=...  the paper testbed on these warm starts on the CPUs, one thread per run, LANES runs.
# Every testbed lane runs GRPO, Pilot-Commit, lrQFp and psSsfit over SEEDS, seed-major, so that a
# cut leaves whole seeds. Warm starts other than the default are built beforehand on the CPU
# machine and carried in .cache/rollalloc. Finished runs have run.json; results in OUTDIR/runs.tgz.
#   bash benchmarks/device_h200.sh OUTDIR [SECONDS] [LANES]
# Session 25's two calls:
#   bash benchmarks/device_h200.sh $OUT 490 12                               # GPU_DEMO=1 CPU_WS="5 6 7"
#   GPU_DEMO=0 GPU_WS=8 CPU_WS=9 SEEDS="0 1 2 3 4 5 6" bash benchmarks/device_h200.sh $OUT 170 12
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: device_h200.sh OUTDIR [SECONDS] [LANES]}; LIMIT=${2:-480}; LANES=${3:-12}
GPU_DEMO=${GPU_DEMO:-1}; GPU_WS=${GPU_WS:-}; GPU_LANES=${GPU_LANES:-4}; CPU_WS=${CPU_WS:-5 6 7}
SEEDS=${SEEDS:-0 1 2 3 4 5 6 7}
PY=${PY:-python3}
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
mkdir -p "$OUT" runs/dev/gpu runs/dev/cpu
T0=$(date +%s)
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc
  lscpu | grep -m1 'Model name'; $PY -c 'import torch, transformers, numpy as np
print("torch", torch.__version__, "cuda", torch.cuda.is_available(), "transformers", transformers.__version__, "numpy", np.__version__)'
} > "$OUT/env.txt" 2>&1
O=options.likelihood-rank
LRQFP="--set $O.unseen=wrong --set $O.strata=level --set $O.quota=true --set $O.fill=true --set $O.window=4"
train() {  # NAME STRATEGY OUTDIR THREADS [args]
  local name=$1 strat=$2 dir=$3 th=$4; shift 4
  OMP_NUM_THREADS=$th $PY -m rollalloc.cli train --config configs/testbed-paper.yaml --strategy "$strat" \
    --threads "$th" --no-progress --out "$dir" "$@"
}
BIG="--set tiny.hidden_size=512 --set tiny.num_layers=6 --set tiny.num_heads=8 --set tiny.intermediate_size=1536"
gpu_tiny() {  # the default model on CUDA, from the CPU runs' cached warm start (ws0)
  local d=runs/dev/gpu
  train grpo grpo $d/smoke 2 --seed 0 --device cuda --max-steps 2 > "$d/smoke.log" 2>&1 || return 1
  # shellcheck disable=SC2086
  for run in "grpo grpo" "lrQFp likelihood-rank $LRQFP" "pilot-commit pilot-commit"; do
    set -- $run; local name=$1 strat=$2; shift 2
    train "$name" "$strat" $d/ws0/runs/$name/seed0 2 --seed 0 --device cuda "$@" > "$d/ws0-$name.log" 2>&1
  done
}
gpu_big() {  # a 20M-parameter model (32x the default), warm start built on the GPU
  local d=runs/dev/gpu
  # shellcheck disable=SC2086
  for seed in 0 1; do for run in "grpo grpo" "lrQFp likelihood-rank $LRQFP" "pilot-commit pilot-commit"; do
    set -- $run; local name=$1 strat=$2; shift 2
    train "$name" "$strat" $d/big/runs/$name/seed$seed 2 --seed $seed --device cuda $BIG "$@" \
      > "$d/big-$name-$seed.log" 2>&1
  done; done
}
jobs_list() {  # WS...: one line per run, seed-major
  for seed in $SEEDS; do for ws in "$@"; do for name in grpo pilot-commit lrQFp psSsfit; do
    echo "ws$ws $name $seed"
  done; done; done
}
one() {  # DEVICE WS NAME SEED: one testbed run
  local dev=$1 ws=$2 name=$3 seed=$4 strat=$3 extra="" th=1
  [ "$name" = lrQFp ] && strat=likelihood-rank extra=$LRQFP
  [ "$name" = psSsfit ] && strat=posterior-signal extra="--set options.posterior-signal.strata=level"
  [ "$dev" = cuda ] && th=2
  # shellcheck disable=SC2086
  train "$name" "$strat" "runs/dev/$dev/$ws/runs/$name/seed$seed" $th --seed "$seed" --device "$dev" \
    --set "warm_start.seed=${ws#ws}" $extra > "runs/dev/$dev/$ws-$name-$seed.log" 2>&1
}
export -f one train; export PY LRQFP
PIDS=()
if [ "$GPU_DEMO" = 1 ]; then gpu_tiny & PIDS+=($!); gpu_big & PIDS+=($!); fi
if [ -n "$GPU_WS" ]; then
  mkdir -p runs/dev/cuda
  train grpo grpo runs/dev/gpu/ws0-repeat/runs/grpo/seed0 2 --seed 0 --device cuda \
    > runs/dev/gpu/ws0-repeat.log 2>&1 & PIDS+=($!)
  # shellcheck disable=SC2086
  jobs_list $GPU_WS | sed 's/^/cuda /' | xargs -P "$GPU_LANES" -L 1 bash -c 'one "$@"' _ & PIDS+=($!)
fi
# shellcheck disable=SC2086
[ -n "$CPU_WS" ] && { jobs_list $CPU_WS | sed 's/^/cpu /' | xargs -P "$LANES" -L 1 bash -c 'one "$@"' _ & PIDS+=($!); }
# shellcheck source=benchmarks/device_watch.sh
source benchmarks/device_watch.sh
watch_lanes   # runs without their checkpoints (a finished one has run.json), and every log
ls runs/dev/*/*/runs/*/*/run.json 2>/dev/null | wc -l
