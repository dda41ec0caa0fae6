#!/bin/bash
# Real testbed runs of one strategy variant over seeds, one after another (a "lane"; start two for
# two cores). Each run is `rollalloc train` on one thread. A finished run (run.json) is skipped; an
# unfinished one is continued with --resume (from its last checkpoint, or from the start when it
# has none), so a lane can be stopped and started again; nothing finished is ever deleted.
#
#   benchmarks/testbed_runs.sh CONFIG NAME STRATEGY "SEEDS" ROOT [train arguments ...]
#
# CONFIG and ROOT are relative to the repository root. Writes ROOT/runs/NAME/seedS (what
# benchmarks/merge_testbed_runs.py --roots ROOT/runs reads) and ROOT/log-NAME-S.txt; exits 1 if a
# run failed. SRC=path runs another source tree (e.g. a copy of src/ frozen at a commit, so that
# editing the checkout does not change runs in flight). Example, the paper testbed's default with
# strata=level, seeds 0-19 (docs/posterior-signal.md):
#   benchmarks/testbed_runs.sh configs/testbed-paper.yaml psSsfit posterior-signal \
#       "$(seq -s ' ' 0 19)" runs/s18/paper --set options.posterior-signal.strata=level
# The default testbed's protocol adds: --budget-rollouts 98304 --set eval_metric=exact --set eval_k=0
set -uo pipefail
cd "$(dirname "$0")/.."
usage() { sed -n 2,17p "$0"; exit 2; }
[ $# -ge 5 ] && [ -n "$2" ] && [ -n "$3" ] && [ -n "$5" ] || usage
C=$1; NAME=$2; S=$3; SEEDS=$4; ROOT=$5; shift 5
[ -f "$C" ] || { echo "testbed_runs.sh: no config $C (paths are relative to the repository root)" >&2; exit 2; }
for seed in $SEEDS; do
  [[ $seed =~ ^[0-9]+$ ]] || { echo "testbed_runs.sh: seed '$seed' is not an integer" >&2; exit 2; }
done
failed=0
for seed in $SEEDS; do
  out=$ROOT/runs/$NAME/seed$seed
  [ -f "$out/run.json" ] && continue
  mkdir -p "$(dirname "$out")"
  resume=(); [ -d "$out" ] && resume=(--resume)
  OMP_NUM_THREADS=1 PYTHONPATH=${SRC:-src} nice -n 10 .venv/bin/python -m rollalloc.cli train \
    --config "$C" --strategy "$S" --seed "$seed" --threads 1 --no-progress \
    --out "$out" "${resume[@]}" "$@" > "$ROOT/log-$NAME-$seed.txt" 2>&1 \
    || { echo "testbed_runs.sh: $NAME seed $seed failed, see $ROOT/log-$NAME-$seed.txt" >&2; failed=1; }
done
exit $failed
