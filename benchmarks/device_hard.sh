#!/bin/bash
# More seeds of the hard pool (configs/testbed-hard.yaml, docs/testbed.md) on a lent GPU machine
# (one H200, 16 cores; docs/gpu.md), inside one 10-minute device call. Session 28's call:
#   bash benchmarks/device_hard.sh $OUT 490        # carry: .cache/rollalloc (the hard warm start)
#   CPU_SEEDS="20 21 22 23 24 25" GPU_SEEDS="26 27 28 29" REPEAT=0 CPU_EXTRA="greso:5 greso:6 greso:7 \
#     knapsack:5 knapsack:6 knapsack:7" bash benchmarks/device_hard.sh $OUT 400
# Lanes, all at once, each run `rollalloc train` under the hard pool's protocol:
#   CPU_LANES runs on the CPUs, one thread each: CPU_SEEDS x STRATS, seed-major (a cut leaves whole
#               seeds), then CPU_EXTRA (NAME:SEED ...), then GRPO seed 0 again (bit-identical to the
#               CPU machine's run?) unless REPEAT=0.
#   GPU_LANES runs on CUDA, one thread each: GPU_SEEDS x STRATS, seed-major. A CUDA run is a
#               different draw from the CPU run of the same seed (other generator, last-bit
#               numerics), so these seeds are merged as extra seeds, never paired with CPU ones.
# Finished runs have run.json; runs (without checkpoints) and logs come back in OUTDIR/runs.tgz.
#   bash benchmarks/device_hard.sh OUTDIR [SECONDS]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: device_hard.sh OUTDIR [SECONDS]}; LIMIT=${2:-480}
CPU_LANES=${CPU_LANES:-12}; GPU_LANES=${GPU_LANES:-4}
CPU_SEEDS=${CPU_SEEDS:-8 9 10 11 12 13 14 15}; GPU_SEEDS=${GPU_SEEDS:-16 17 18 19}
STRATS=${STRATS:-grpo psS speed-rl pilot-commit}
PY=${PY:-python3}
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 PY
mkdir -p "$OUT" runs/dev
T0=$(date +%s)
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc
  lscpu | grep -m1 'Model name'; $PY -c 'import torch, transformers, numpy as np
print("torch", torch.__version__, "cuda", torch.cuda.is_available(), "transformers", transformers.__version__, "numpy", np.__version__)'
} > "$OUT/env.txt" 2>&1
one() {  # DEVICE NAME SEED: one hard-pool run into runs/dev/DEVICE/runs/NAME/seedSEED
  local dev=$1 name=$2 seed=$3 strat=$2 extra=() th=1 dir log=runs/dev/$1-$2-$3.log
  [ "$name" = psS ] && strat=posterior-signal extra=(--set options.posterior-signal.strata=level)
  dir=runs/dev/$dev/runs/$name/seed$seed
  [ "$dev" = cpu-repeat ] && { dev=cpu; dir=runs/dev/cpu-repeat/runs/$name/seed$seed; }
  OMP_NUM_THREADS=$th $PY -m rollalloc.cli train --config configs/testbed-hard.yaml --strategy "$strat" \
    --seed "$seed" --threads "$th" --device "$dev" --no-progress --out "$dir" \
    --budget-rollouts 98304 --set eval_metric=exact --set eval_k=0 --set eval_every_rollouts=4096 \
    "${extra[@]}" > "$log" 2>&1
}
export -f one
jobs_for() {  # DEVICE SEEDS...
  local dev=$1 seed name; shift
  for seed in "$@"; do for name in $STRATS; do echo "$dev $name $seed"; done; done
}
PIDS=()
# shellcheck disable=SC2086
{ jobs_for cpu $CPU_SEEDS; for j in ${CPU_EXTRA:-}; do echo "cpu ${j%:*} ${j#*:}"; done; [ "${REPEAT:-1}" = 1 ] && echo "cpu-repeat grpo 0"; } | xargs -P "$CPU_LANES" -L 1 bash -c 'one "$@"' _ &
PIDS+=($!)
# shellcheck disable=SC2086
[ "$GPU_LANES" -gt 0 ] && { jobs_for cuda $GPU_SEEDS | xargs -P "$GPU_LANES" -L 1 bash -c 'one "$@"' _ & PIDS+=($!); }
# shellcheck source=benchmarks/device_watch.sh
source benchmarks/device_watch.sh
watch_lanes   # runs without their checkpoints (a finished one has run.json), and every log
echo "finished runs: $(find runs/dev -name run.json | wc -l)"
