#!/bin/bash
# Issue 17: posterior-signal against every peer and the ceiling oracle, 3 seeds, on every pool.
#   benchmarks/posterior_signal_runs.sh [STRATEGIES [POOL ...]]    results in runs/i17-POOL[-TAG]
# STRATEGIES defaults to every peer, the oracle and posterior-signal; TAG=name sets a suffix;
# EXTRA="--set options.posterior-signal.p_max=1" adds arguments to every simulate command.
# Then: python benchmarks/posterior_signal_table.py runs/i17-...  (the table of docs/posterior-signal.md)
set -euo pipefail
cd "$(dirname "$0")/.."
S=${1:-grpo,dapo,pilot-commit,cero,speed-rl,greso,mopps,knapsack,oracle,posterior-signal}
shift || true
run() {  # pool, then extra simulate arguments
  local pool=$1; shift
  local out=runs/i17-$pool${TAG:+-$TAG}
  [ -e "$out/summary.json" ] && { echo "$out exists"; return; }
  OMP_NUM_THREADS=1 nice -n 15 .venv/bin/rollalloc simulate --strategies "$S" --preset "$pool" \
    --seeds 0,1,2 --out "$out" --no-progress "$@" ${EXTRA:-} > "$out.log" 2>&1
  echo "$out done"
}
for p in ${@:-testbed-arith shape-small shape-hard shape-easy shape-bimodal dapo17k deepmath shape-large}; do
  case $p in
    testbed-arith) run $p --budget-rollouts 98304 --train-prompts 64 --group-size 8 ;;  # the real testbed's shape
    shape-small|shape-hard|shape-easy|shape-bimodal) run $p --budget-rollouts 1024000 ;;
    *) run $p --budget-rollouts 2048000 ;;                       # dapo17k, deepmath, shape-large
  esac
done
