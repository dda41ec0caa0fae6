#!/usr/bin/env bash
# verl end to end on CPUs, long enough to show learning: RollallocRayPPOTrainer with a tiny Qwen2
# (warm-started by SFT) on the arith task, 2 Ray worker processes (FSDP2 on gloo), generation by the
# hf_cpu rollout server, weight sync after every update, verl's reward manager and GRPO advantages.
# Prints the training reward per 10 steps, the weight-sync check and the wall time.
#   bash examples/verl/cpu_learning.sh                      # grpo, 50 steps
#   STRATEGY=pilot-commit STEPS=50 bash examples/verl/cpu_learning.sh
#   bash examples/verl/cpu_learning.sh trainer.test_freq=10 # + any verl option
# Needs .venv-verl (bash scripts/verl-env.sh). No GPU, no download.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
PY="${PY:-$ROOT/.venv-verl/bin/python}"
STRATEGY="${STRATEGY:-grpo}"
STEPS="${STEPS:-50}"
WORK="${WORK:-$ROOT/runs/verl-cpu-learning-$STRATEGY}"
test -x "$PY" || bash "$ROOT/scripts/verl-env.sh"
rm -rf "$WORK/ckpt" "$WORK/metrics.jsonl" "$WORK/hf_cpu.jsonl"
mkdir -p "$WORK"
t0=$(date +%s)
VERL_FILE_LOGGER_PATH="$WORK/metrics.jsonl" ROLLALLOC_HF_CPU_LOG="$WORK/hf_cpu.jsonl" \
  "$PY" -m rollalloc.integrations.verl.cpu_run --workdir "$WORK" --strategy "$STRATEGY" \
  --steps "$STEPS" --prompts 16 --n 8 --minibatches 4 --lr "${LR:-2e-4}" --warm-steps "${WARM:-60}" \
  --num-train "${NUM_TRAIN:-128}" --terms "${TERMS:-2,3}" \
  -- trainer.logger='[console,file]' "$@" >"$WORK/run.log" 2>&1 ||
  { tail -n 40 "$WORK/run.log"; exit 1; }
wall=$(($(date +%s) - t0))
"$PY" - "$WORK" "$wall" <<'PY'
import json, sys
from rollalloc.integrations.verl.hf_rollout import read_events, sync_violations
work, wall = sys.argv[1], int(sys.argv[2])
rows = [json.loads(line)["data"] for line in open(f"{work}/metrics.jsonl")]
score = [r["critic/score/mean"] for r in rows]
step_s = [r["timing_s/step"] for r in rows]
for i in range(0, len(score), 10):
    w = score[i : i + 10]
    print(f"steps {i + 1:3d}-{i + len(w):3d}: mean training reward {sum(w) / len(w):.3f}")
events = read_events(f"{work}/hf_cpu.jsonl")
bad = sync_violations(events)
generated = sum(e["n"] for e in events if e["event"] == "generate")
print(f"rollouts generated {generated}, allocator's count {rows[-1]['rollalloc/cum_rollouts']:.0f}")
print(f"weight sync: {'OK' if not bad else bad[:3]} ({sum(e['event'] == 'actor' for e in events)} syncs)")
print(f"wall time {wall} s ({len(rows)} steps; median step {sorted(step_s)[len(step_s) // 2]:.2f} s)")
PY
