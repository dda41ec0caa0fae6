#!/usr/bin/env bash
# Pilot-Commit on Qwen3-4B / Polaris-53K, the reference's setting: n_pilot 16, n_commit 48
# (group 64 = the GRPO baseline's n), otherwise as the 1.5B script.
#   TRAIN=... VAL=... MODEL=Qwen/Qwen3-4B bash examples/verl/pc_qwen3-4b_polaris.sh [more overrides]
source "$(dirname "$0")/common.sh"
python -m rollalloc.integrations.verl.main "${COMMON[@]}" \
  data.train_files="${TRAIN:?set TRAIN to the Polaris-53K train parquet}" \
  data.val_files="${VAL:?set VAL to the validation parquet}" \
  data.max_prompt_length=1024 data.max_response_length=16384 \
  actor_rollout_ref.model.path="${MODEL:-Qwen/Qwen3-4B}" \
  actor_rollout_ref.rollout.n=64 \
  rollalloc.pilot_commit.n_pilot=16 rollalloc.pilot_commit.n_commit=48 \
  trainer.project_name=rollalloc-verl trainer.experiment_name=pc-qwen3-4b-polaris \
  "$@"
