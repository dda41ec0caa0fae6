#!/usr/bin/env bash
# One-command GPU smoke test of the verl integration (one GPU, ~10 min): builds an env with verl's
# vLLM extra, makes a tiny arithmetic data set in verl's parquet format, and runs 3 Pilot-Commit steps
# with a checkpoint at step 2, then resumes to step 4. Passes when both runs exit 0 and the resumed
# run logged rollalloc/* metrics.
#   MODEL=/path/to/a/small/causal-lm (e.g. Qwen2.5-0.5B-Instruct, local) bash examples/verl/gpu_smoke.sh
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
WORK="${WORK:-$ROOT/runs/verl-gpu-smoke}"
MODEL="${MODEL:?set MODEL to a local checkpoint of a small causal LM}"
VENV="${VENV:-$ROOT/.venv-verl-gpu}"
mkdir -p "$WORK"
if [[ ! -x "$VENV/bin/python" ]]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q 'verl[vllm]==0.9.1'   # verl's pinned torch 2.11 + vLLM 0.24 (CUDA)
  "$VENV/bin/pip" install -q --no-deps -e "$ROOT"
fi
PY="$VENV/bin/python"
"$PY" - "$WORK" <<'PY'
import sys, random, pandas as pd
work = sys.argv[1]
def rows(n, seed):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        out.append({"data_source": "openai/gsm8k",
                    "prompt": [{"role": "user", "content": f"What is {a} + {b}? Answer after ####."}],
                    "ability": "math", "reward_model": {"style": "rule", "ground_truth": str(a + b)},
                    "extra_info": {"index": i}})
    return pd.DataFrame(out)
rows(256, 0).to_parquet(f"{work}/train.parquet"); rows(32, 1).to_parquet(f"{work}/val.parquet")
PY
run() {
  VERL_FILE_LOGGER_PATH="$WORK/metrics.jsonl" "$PY" -m rollalloc.integrations.verl.main \
    data.train_files="$WORK/train.parquet" data.val_files="$WORK/val.parquet" \
    data.train_batch_size=8 data.max_prompt_length=128 data.max_response_length=128 \
    actor_rollout_ref.model.path="$MODEL" actor_rollout_ref.rollout.name=vllm \
    actor_rollout_ref.rollout.n=8 actor_rollout_ref.rollout.gpu_memory_utilization=0.4 \
    actor_rollout_ref.actor.ppo_mini_batch_size=4 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 \
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8 \
    algorithm.adv_estimator=grpo actor_rollout_ref.actor.use_kl_loss=false \
    rollalloc.strategy=pilot-commit rollalloc.pilot_commit.n_pilot=2 rollalloc.pilot_commit.n_commit=6 \
    rollalloc.pilot_commit.gen_prompts=24 rollalloc.pilot_commit.on_max_rounds=train \
    trainer.n_gpus_per_node=1 trainer.nnodes=1 trainer.logger='["console","file"]' \
    trainer.val_before_train=false trainer.test_freq=-1 trainer.save_freq=2 \
    trainer.default_local_dir="$WORK/ckpt" trainer.resume_mode=auto "$@"
}
run trainer.total_training_steps=3
test -f "$WORK/ckpt/global_step_2/rollalloc/allocator.npz"
run trainer.total_training_steps=4
grep -q '"rollalloc/cum_rollouts"' "$WORK/metrics.jsonl"
echo "gpu_smoke: OK ($(wc -l <"$WORK/metrics.jsonl") steps logged; checkpoints in $WORK/ckpt)"
