#!/usr/bin/env bash
# The GRPO baseline through the same launcher (strategy grpo: every prompt n rollouts), for a
# like-for-like comparison of cumulative rollouts: N=128 for the 1.5B setting, 64 for the 4B one.
source "$(dirname "$0")/common.sh"
N=${N:-128}
python -m rollalloc.integrations.verl.main "${COMMON[@]}" \
  rollalloc.strategy=grpo actor_rollout_ref.rollout.n="$N" \
  data.train_files="${TRAIN:?}" data.val_files="${VAL:?}" \
  actor_rollout_ref.model.path="${MODEL:?}" \
  trainer.project_name=rollalloc-verl trainer.experiment_name="grpo-n$N" "$@"
