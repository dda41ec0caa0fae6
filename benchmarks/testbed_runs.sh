#!/bin/bash
# Real testbed runs of one strategy variant over seeds, one after another (a "lane"; start two for
# two cores). Each run is `rollalloc train` on one thread; a finished run (DONE) is skipped, an
# unfinished one started again, so a lane can be stopped and restarted.
#
#   benchmarks/testbed_runs.sh CONFIG NAME STRATEGY "SEEDS" ROOT [train arguments ...]
#
# writes ROOT/runs/NAME/seedS (what benchmarks/merge_testbed_runs.py --roots ROOT/runs reads) and
# ROOT/log-NAME-S.txt. SRC=path runs another source tree (e.g. a copy of src/ frozen at a commit, so
# that editing the checkout does not change runs in flight). Example, the paper testbed's default
# with strata=level, seeds 0-19 (docs/posterior-signal.md):
#   benchmarks/testbed_runs.sh configs/testbed-paper.yaml psSsfit posterior-signal \
#       "$(seq -s ' ' 0 19)" runs/s18/paper --set options.posterior-signal.strata=level
# and the default testbed's protocol adds: --budget-rollouts 98304 --set eval_metric=exact --set eval_k=0
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 5 ] || { sed -n 2,16p "$0"; exit 2; }
C=$1; NAME=$2; S=$3; SEEDS=$4; ROOT=$5; shift 5
[ -f "$C" ] || { echo "testbed_runs.sh: no config $C" >&2; exit 2; }
for seed in $SEEDS; do
  out=$ROOT/runs/$NAME/seed$seed
  [ -f "$out/DONE" ] && continue
  rm -rf "$out"; mkdir -p "$(dirname "$out")"
  OMP_NUM_THREADS=1 PYTHONPATH=${SRC:-src} nice -n 10 .venv/bin/python -m rollalloc.cli train \
    --config "$C" --strategy "$S" --seed "$seed" --threads 1 --no-progress \
    --out "$out" "$@" > "$ROOT/log-$NAME-$seed.txt" 2>&1 && touch "$out/DONE" \
    || echo "testbed_runs.sh: $NAME seed $seed failed, see $ROOT/log-$NAME-$seed.txt" >&2
done
