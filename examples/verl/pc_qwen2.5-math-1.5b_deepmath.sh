#!/usr/bin/env bash
# Pilot-Commit on Qwen2.5-Math-1.5B / DeepMath-103K, the reference's setting: n_pilot 32, n_commit 96
# (group 128 = the GRPO baseline's n), train batch 128 prompts, pilot batch 384, lr 1e-6, clip
# 0.2/0.28, no KL, token-mean. Data: verl-format parquet files (verl's examples/data_preprocess).
#   TRAIN=... VAL=... MODEL=Qwen/Qwen2.5-Math-1.5B bash examples/verl/pc_qwen2.5-math-1.5b_deepmath.sh [more overrides]
source "$(dirname "$0")/common.sh"
python -m rollalloc.integrations.verl.main "${COMMON[@]}" \
  data.train_files="${TRAIN:?set TRAIN to the DeepMath-103K train parquet}" \
  data.val_files="${VAL:?set VAL to the validation parquet (AIME/AMC/MATH500)}" \
  data.max_prompt_length=1024 data.max_response_length=8192 \
  actor_rollout_ref.model.path="${MODEL:-Qwen/Qwen2.5-Math-1.5B}" \
  actor_rollout_ref.rollout.n=128 \
  rollalloc.pilot_commit.n_pilot=32 rollalloc.pilot_commit.n_commit=96 \
  trainer.project_name=rollalloc-verl trainer.experiment_name=pc-qwen2.5-math-1.5b-deepmath \
  "$@"
