# Shared by the launch scripts: verl settings of the Pilot-Commit reference scripts
# (recipe/pc/train_scripts in databricks/pilot-commit), as verl 0.9.x options. Sourced, not run.
# Needs: pip install 'rollalloc[verl]' plus verl's GPU extras (e.g. pip install 'verl[vllm]==0.9.1').
set -euo pipefail
NNODES=${NNODES:-1}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
ROLLOUT_TP=${ROLLOUT_TP:-1}
COMMON=(
  trainer.use_v1=false
  algorithm.adv_estimator=grpo
  algorithm.use_kl_in_reward=false
  actor_rollout_ref.actor.use_kl_loss=false
  actor_rollout_ref.actor.optim.lr=1e-6
  actor_rollout_ref.actor.clip_ratio_low=0.2
  actor_rollout_ref.actor.clip_ratio_high=0.28
  actor_rollout_ref.actor.loss_agg_mode=token-mean
  actor_rollout_ref.actor.ppo_mini_batch_size=32
  actor_rollout_ref.actor.use_dynamic_bsz=true
  actor_rollout_ref.rollout.name=vllm
  actor_rollout_ref.rollout.temperature=1.0
  actor_rollout_ref.rollout.tensor_model_parallel_size=${ROLLOUT_TP}
  actor_rollout_ref.rollout.gpu_memory_utilization=0.7
  data.train_batch_size=128
  data.filter_overlong_prompts=true
  rollalloc.strategy=pilot-commit
  rollalloc.reward_key=acc
  rollalloc.pilot_commit.gen_prompts=384
  rollalloc.pilot_commit.p_lower=0.125
  rollalloc.pilot_commit.p_upper=0.25
  rollalloc.pilot_commit.exclude_threshold=1.0
  rollalloc.pilot_commit.max_off_steps=4
  rollalloc.pilot_commit.max_rounds=10
  trainer.nnodes=${NNODES}
  trainer.n_gpus_per_node=${GPUS_PER_NODE}
  trainer.logger='["console","wandb"]'
  trainer.save_freq=20
  trainer.test_freq=20
  trainer.resume_mode=auto
)
