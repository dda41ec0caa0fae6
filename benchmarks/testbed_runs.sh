#!/bin/bash
# Real testbed runs of one strategy variant over seeds, one after another (a "lane"; start two for
# two cores). Each run is `rollalloc train` on one thread. A finished run (run.json) is skipped; an
# unfinished one is continued with --resume (from its last checkpoint, or from the start when it
# has none), so a lane can be stopped and started again; nothing finished is ever deleted. A run
# in progress holds ROOT/runs/NAME/seedS.lock (the lane's PID): another lane given the same run
# skips it, naming the holder, instead of writing into it; a lock whose process is gone is taken.
#
#   benchmarks/testbed_runs.sh CONFIG NAME STRATEGY "SEEDS" ROOT [train arguments ...]
#
# CONFIG and ROOT are relative to the repository root. Writes ROOT/runs/NAME/seedS (what
# benchmarks/merge_testbed_runs.py --roots ROOT/runs reads) and ROOT/log-NAME-S.txt; exits 1 if a
# run failed or was skipped. SRC=path runs another source tree (e.g. a copy of src/ frozen at a
# commit, so that editing the checkout does not change runs in flight). Example, the paper's default with
# strata=level, seeds 0-19 (docs/posterior-signal.md):
#   benchmarks/testbed_runs.sh configs/testbed-paper.yaml psSsfit posterior-signal \
#       "$(seq -s ' ' 0 19)" runs/s18/paper --set options.posterior-signal.strata=level
# The default testbed's protocol adds: --budget-rollouts 98304 --set eval_metric=exact --set eval_k=0
set -uo pipefail
cd "$(dirname "$0")/.."
usage() { sed -n 2,18p "$0"; exit 2; }
[ $# -ge 5 ] && [ -n "$2" ] && [ -n "$3" ] && [ -n "$5" ] || usage
C=$1; NAME=$2; S=$3; SEEDS=$4; ROOT=$5; shift 5
[ -f "$C" ] || { echo "testbed_runs.sh: no config $C (paths are relative to the repository root)" >&2; exit 2; }
for seed in $SEEDS; do
  [[ $seed =~ ^[0-9]+$ ]] || { echo "testbed_runs.sh: seed '$seed' is not an integer" >&2; exit 2; }
done
lock=""
trap '[ -n "$lock" ] && rm -rf "$lock"' EXIT
trap 'exit 130' INT TERM
take_lock() {  # $1: the lock directory; fails if a live process holds it
  if ! mkdir "$1" 2>/dev/null; then
    local pid; pid=$(cat "$1/pid" 2>/dev/null)
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then return 1; fi
    rm -rf "$1"; mkdir "$1" 2>/dev/null || return 1      # its process is gone: a stale lock
  fi
  echo $$ > "$1/pid"
}
failed=0
for seed in $SEEDS; do
  out=$ROOT/runs/$NAME/seed$seed
  [ -f "$out/run.json" ] && continue
  mkdir -p "$(dirname "$out")"
  if ! take_lock "$out.lock"; then
    echo "testbed_runs.sh: $NAME seed $seed skipped: another lane runs it ($out.lock, PID $(cat "$out.lock/pid" 2>/dev/null))" >&2
    failed=1; continue
  fi
  lock=$out.lock
  if [ -f "$out/run.json" ]; then rm -rf "$lock"; lock=""; continue; fi  # finished meanwhile
  resume=(); [ -d "$out" ] && resume=(--resume)
  OMP_NUM_THREADS=1 PYTHONPATH=${SRC:-src} nice -n 10 .venv/bin/python -m rollalloc.cli train \
    --config "$C" --strategy "$S" --seed "$seed" --threads 1 --no-progress \
    --out "$out" "${resume[@]}" "$@" > "$ROOT/log-$NAME-$seed.txt" 2>&1 \
    || { echo "testbed_runs.sh: $NAME seed $seed failed, see $ROOT/log-$NAME-$seed.txt" >&2; failed=1; }
  rm -rf "$lock"; lock=""
done
exit $failed
