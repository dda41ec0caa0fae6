"""verl's RayPPOTrainer with its generation step driven by a rollalloc allocator (ask/tell).

verl's own `fit` draws `gen_batch_size` prompts from its dataloader, repeats each `rollout.n` times
and trains on all of them. Here the allocator is the sampler:

    while (request := allocator.ask()) is not None:          # one or more generation passes
        rows = dataset[request.prompt_ids].sample_level_repeat(request.num_rollouts)
        out  = async_rollout_manager.generate_sequences(rows) # verl's vLLM/SGLang agent loop
        rewards = reward_extra_info["acc"] or rm_scores.sum   # verl's own reward manager
        allocator.tell(Outcome(prompt ids, store.add(out), rewards, tokens))
    train_batch = allocator.batch()                           # ragged groups of handles
    batch = store.get(train_batch.handles), uid per group   # pilot ∪ commit under one uid
    old log-probs, ref, values, advantages, actor/critic update: verl's own methods, unchanged

Everything after the batch is assembled is verl's code path (the same private methods its `fit`
calls), so every advantage estimator, loss aggregation, KL option and worker backend of verl works.
Buffered rollouts (Pilot-Commit's pilots of kept prompts) stay in a RolloutStore between steps;
allocator state and store are written into verl's checkpoint folder and restored on resume.
"""

from __future__ import annotations

import json
import os
import time
from pprint import pprint
from typing import Any

import numpy as np
import torch
from omegaconf import OmegaConf
from verl import DataProto
from verl.protocol import pad_dataproto_to_divisor, unpad_dataproto
from verl.trainer.ppo.core_algos import agg_loss
from verl.trainer.ppo.metric_utils import (
    compute_data_metrics,
    compute_throughout_metrics,
    compute_timing_metrics,
)
from verl.trainer.ppo.ray_trainer import (
    RayPPOTrainer,
    apply_kl_penalty,
    compute_advantage,
    compute_response_mask,
)
from verl.trainer.ppo.reward import extract_reward
from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path
from verl.utils.debug import marked_timer
from verl.utils.metric import reduce_metrics

from rollalloc.allocator import wire_pool_columns
from rollalloc.integrations import allocator_batch_shape
from rollalloc.integrations.verl.adapter import (
    PHASE,
    PROMPT_ID,
    assemble_train_batch,
    build_generation_batch,
    response_likelihoods,
    response_tokens,
    rollalloc_metrics,
    rollout_rewards,
)
from rollalloc.integrations.verl.config import allocator_from_config, reward_key
from rollalloc.integrations.verl.store import RolloutStore
from rollalloc.state import load_state, save_state
from rollalloc.types import Outcome, Request

CKPT_DIR = "rollalloc"  # inside verl's global_step_{n}/


class RollallocRayPPOTrainer(RayPPOTrainer):
    """RayPPOTrainer whose prompts and rollouts per prompt come from a rollalloc allocator.

    Built like RayPPOTrainer (same arguments); the allocator comes from the config's `rollalloc:`
    section (config/rollalloc_trainer.yaml), or is passed as `allocator=`.
    """

    def __init__(self, *args: Any, allocator=None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        ra_cfg = self.config.get("rollalloc", None)
        if allocator is None:
            if ra_cfg is None:
                raise ValueError(
                    "RollallocRayPPOTrainer: the config has no `rollalloc:` section; launch with "
                    "rollalloc.integrations.verl.main or pass allocator="
                )
            allocator = allocator_from_config(ra_cfg, num_prompts=len(self.train_dataset))
        self.allocator = allocator
        wire_pool_columns(allocator, self.train_dataset)  # e.g. strata: extra_info.level
        self.rollout_store = RolloutStore()
        self.reward_key = reward_key(ra_cfg) if ra_cfg is not None else "auto"
        self.save_allocator_state = (
            bool(ra_cfg.get("checkpoint", True)) if ra_cfg is not None else True
        )
        self._reward_extra_keys: list[str] = []
        self._collate_fn = self.train_dataloader.collate_fn
        self._check_config()
        # verl counts an epoch as one pass of its dataloader of gen_batch_size; the allocator's
        # epoch is one pass of the pool. Unless total_training_steps is set, train for
        # total_epochs pool passes at train_prompts groups per step.
        if self.config.trainer.total_training_steps is None:
            steps_per_epoch = max(1, len(self.train_dataset) // self.allocator.config.train_prompts)
            self.total_training_steps = steps_per_epoch * self.config.trainer.total_epochs

    def _check_config(self) -> None:
        if self.allocator.config.train_prompts != self.config.data.train_batch_size:
            raise ValueError(
                f"rollalloc.train_prompts={self.allocator.config.train_prompts} differs from "
                f"data.train_batch_size={self.config.data.train_batch_size}: verl sizes PPO "
                "mini-batches from data.train_batch_size; set them equal"
            )
        shape = allocator_batch_shape(self.allocator)
        hint = None if shape is None else shape[1]
        n = self.config.actor_rollout_ref.rollout.n
        if hint is not None and hint != n:
            raise ValueError(
                f"actor_rollout_ref.rollout.n={n}, but {self.allocator.name} trains groups of {hint} "
                f"rollouts: verl sizes PPO mini-batches as ppo_mini_batch_size x rollout.n rollouts, "
                f"so set actor_rollout_ref.rollout.n={hint}"
            )

    # ------------------------------------------------------------------ generation (ask/tell)

    def _prompt_rows(self, prompt_ids: np.ndarray) -> DataProto:
        """One DataProto row per prompt id: the dataset items, collated as verl's dataloader does."""
        items = [self.train_dataset[int(i)] for i in prompt_ids]
        return DataProto.from_single_dict(self._collate_fn(items))

    def _generate(self, request: Request, timing_raw: dict) -> DataProto:
        """Generate and score the rollouts of `request`: one row per rollout, in request order."""
        batch = build_generation_batch(request, self._prompt_rows(request.prompt_ids))
        batch.meta_info["temperature"] = self.config.actor_rollout_ref.rollout.temperature
        tags = batch.pop(non_tensor_batch_keys=[PROMPT_ID, PHASE])  # not for the agent loop
        gen_batch = self._get_gen_batch(batch)
        gen_batch.meta_info["global_steps"] = self.global_steps
        # verl's agent loop splits a batch evenly over its workers: pad with copies, drop them after.
        divisor = int(
            OmegaConf.select(self.config, "actor_rollout_ref.rollout.agent.num_workers") or 1
        )
        gen_padded, pad_size = pad_dataproto_to_divisor(gen_batch, divisor)
        out = self.async_rollout_manager.generate_sequences(gen_padded)
        for k, v in out.meta_info.pop("timing", {}).items():
            timing_raw[k] = timing_raw.get(k, 0.0) + v
        out = unpad_dataproto(out, pad_size=pad_size)
        batch = batch.union(out)
        batch.non_tensor_batch.update(tags.non_tensor_batch)
        if self.use_rm and "rm_scores" not in batch.batch.keys():
            # a colocated reward model shares the GPUs with the rollout replicas (as verl's _validate)
            self.checkpoint_manager.sleep_replicas()
            batch = batch.union(self._compute_reward_colocate(batch))
            self.checkpoint_manager.update_weights(self.global_steps)
        for k in batch.meta_info.get("reward_extra_keys", []):
            if k not in self._reward_extra_keys:
                self._reward_extra_keys.append(k)
        return batch

    def _generate_and_tell(self, request: Request, timing_raw: dict) -> None:
        batch = self._generate(request, timing_raw)
        rewards = rollout_rewards(batch, self.reward_key)
        tokens = response_tokens(batch)
        likelihoods = response_likelihoods(batch)  # None without rollout log-probs
        handles = self.rollout_store.add(batch)
        try:
            self.allocator.tell(
                Outcome(
                    prompt_ids=np.asarray(batch.non_tensor_batch[PROMPT_ID], dtype=np.int64),
                    handles=handles,
                    rewards=rewards,
                    tokens=tokens,
                    policy_version=self.global_steps,
                    logprob=None if likelihoods is None else likelihoods[0],
                    completion_key=None if likelihoods is None else likelihoods[1],
                )
            )
        except ValueError:
            self.rollout_store.release(handles)
            raise

    def collect_step(self, timing_raw: dict) -> tuple[DataProto, Any]:
        """Ask/tell until the allocator's batch is ready; return (verl batch, TrainBatch)."""
        while (request := self.allocator.ask()) is not None:
            self._generate_and_tell(request, timing_raw)
        train_batch = self.allocator.batch()
        self.rollout_store.release(train_batch.released)
        batch = assemble_train_batch(train_batch, self.rollout_store)
        self.rollout_store.release(train_batch.handles)  # their rows are copied into `batch`
        batch.meta_info = {
            "temperature": self.config.actor_rollout_ref.rollout.temperature,
            "reward_extra_keys": [
                k for k in self._reward_extra_keys if k in batch.non_tensor_batch
            ],
        }
        # no "global_steps" here: verl's rollout servers return it per rollout (TokenOutput
        # extra_fields -> a non-tensor column), and DataProto.to_tensordict, which the actor calls
        # take, refuses a meta_info key that is also a column (verl's fit sets it on the
        # generation batch only, as _generate does)
        return batch, train_batch

    # ------------------------------------------------------------------ one PPO update (verl's path)

    def train_on(
        self, batch: DataProto, metrics: dict, timing_raw: dict, is_last_step: bool
    ) -> DataProto:
        """verl's update on an assembled batch: the steps of RayPPOTrainer.fit after generation."""
        cfg = self.config
        if "response_mask" not in batch.batch.keys():
            batch.batch["response_mask"] = compute_response_mask(batch)
        if cfg.trainer.balance_batch:
            self._balance_batch(batch, metrics=metrics)
        batch.meta_info["global_token_num"] = torch.sum(
            batch.batch["attention_mask"], dim=-1
        ).tolist()
        seqlens = []
        for mm in batch.non_tensor_batch.get("multi_modal_inputs", []):
            if isinstance(mm, dict) and "image_grid_thw" in mm:
                seqlens.extend(mm["images_seqlens"].tolist())
        batch.meta_info["images_seqlens"] = seqlens

        reward_tensor, reward_extra_infos = extract_reward(batch)

        rollout_corr = cfg.algorithm.get("rollout_correction", None)
        bypass = rollout_corr and rollout_corr.get("bypass_mode", False)
        if bypass:
            # old log-probs := behaviour log-probs: stale pilot rollouts are corrected by verl's
            # rollout-correction weights (the reference recomputes them instead: the `else` branch)
            from verl.trainer.ppo.rollout_corr_helper import apply_bypass_mode

            apply_bypass_mode(
                batch=batch,
                rollout_corr_config=rollout_corr,
                policy_loss_config=cfg.actor_rollout_ref.actor.policy_loss,
            )
        else:
            with marked_timer("old_log_prob", timing_raw, color="blue"):
                old_log_prob, mfu = self._compute_old_log_prob(batch)
                actor_cfg = cfg.actor_rollout_ref.actor
                entropy = agg_loss(
                    loss_mat=old_log_prob.batch["entropys"],
                    loss_mask=batch.batch["response_mask"],
                    loss_agg_mode=actor_cfg.loss_agg_mode,
                    loss_scale_factor=actor_cfg.loss_scale_factor,
                )
                metrics.update(
                    {"actor/entropy": entropy.detach().item(), "perf/mfu/actor_infer": mfu}
                )
                old_log_prob.batch.pop("entropys")
                batch = batch.union(old_log_prob)
                if "rollout_log_probs" in batch.batch.keys():
                    # rollout vs actor probabilities (verl's fit logs the same): ~0 for rollouts
                    # generated by the weights being trained, as long as the weight sync works
                    from verl.utils.debug.metrics import calculate_debug_metrics

                    metrics.update(calculate_debug_metrics(batch))

        if self.use_reference_policy:
            with marked_timer("ref", timing_raw, color="olive"):
                batch = batch.union(self._compute_ref_log_prob(batch))
        if self.use_critic:
            with marked_timer("values", timing_raw, color="cyan"):
                batch = batch.union(self._compute_values(batch))

        with marked_timer("adv", timing_raw, color="brown"):
            batch.batch["token_level_scores"] = reward_tensor
            if reward_extra_infos:
                batch.non_tensor_batch.update(
                    {k: np.array(v) for k, v in reward_extra_infos.items()}
                )
            if cfg.algorithm.use_kl_in_reward:
                batch, kl_metrics = apply_kl_penalty(
                    batch, kl_ctrl=self.kl_ctrl_in_reward, kl_penalty=cfg.algorithm.kl_penalty
                )
                metrics.update(kl_metrics)
            else:
                batch.batch["token_level_rewards"] = batch.batch["token_level_scores"]
            if rollout_corr is not None and "rollout_log_probs" in batch.batch and not bypass:
                from verl.trainer.ppo.rollout_corr_helper import (
                    compute_rollout_correction_and_add_to_batch,
                )

                batch, is_metrics = compute_rollout_correction_and_add_to_batch(batch, rollout_corr)
                metrics.update(is_metrics)
            # Groups are told apart by `uid` alone, so ragged groups need nothing special here.
            batch = compute_advantage(
                batch,
                adv_estimator=cfg.algorithm.adv_estimator,
                gamma=cfg.algorithm.gamma,
                lam=cfg.algorithm.lam,
                num_repeat=cfg.actor_rollout_ref.rollout.n,
                norm_adv_by_std_in_grpo=cfg.algorithm.get("norm_adv_by_std_in_grpo", True),
                config=cfg.algorithm,
            )

        if self.use_critic:
            with marked_timer("update_critic", timing_raw, color="pink"):
                metrics.update(reduce_metrics(self._update_critic(batch).meta_info["metrics"]))
        if cfg.trainer.critic_warmup > self.global_steps:
            self.checkpoint_manager.update_weights(self.global_steps)
        else:
            with marked_timer("update_actor", timing_raw, color="red"):
                actor_output = self._update_actor(batch)
            if cfg.trainer.save_freq > 0 and (
                is_last_step or self.global_steps % cfg.trainer.save_freq == 0
            ):
                with marked_timer("save_checkpoint", timing_raw, color="green"):
                    self._save_checkpoint()
            with marked_timer("update_weights", timing_raw, color="red"):
                self.checkpoint_manager.update_weights(self.global_steps)
            metrics.update(reduce_metrics(actor_output.meta_info["metrics"]))
        return batch

    # ------------------------------------------------------------------ the loop

    def fit(self):
        """Train for `total_training_steps` steps, each one allocator step (see the module doc)."""
        from verl.utils.tracking import Tracking

        if self._dump_executor._shutdown:
            self._init_dump_executor()
        logger = Tracking(
            project_name=self.config.trainer.project_name,
            experiment_name=self.config.trainer.experiment_name,
            default_backend=self.config.trainer.logger,
            config=OmegaConf.to_container(self.config, resolve=True),
        )
        self.global_steps = 0
        self._load_checkpoint()
        self.checkpoint_manager.update_weights(self.global_steps)
        _skip_manager("init", self.config)

        if self.config.trainer.get("val_before_train", True) and self.val_dataset is not None:
            val_metrics = self._validate()
            pprint(f"Initial validation metrics: {val_metrics}")
            logger.log(data=val_metrics, step=self.global_steps)
            if self.config.trainer.get("val_only", False):
                self._shutdown_dump_executor()
                return

        self.global_steps += 1
        _skip_manager("set_step", self.global_steps)
        while self.global_steps <= self.total_training_steps:
            is_last_step = self.global_steps >= self.total_training_steps
            metrics: dict[str, Any] = {}
            timing_raw: dict[str, float] = {}
            with marked_timer("step", timing_raw):
                t0 = time.perf_counter()
                batch, train_batch = self.collect_step(timing_raw)
                self.checkpoint_manager.sleep_replicas()
                timing_raw["gen"] = time.perf_counter() - t0
                metrics.update(rollalloc_metrics(train_batch.stats, train_batch))
                metrics["rollalloc/store_rollouts"] = float(len(self.rollout_store))
                batch = self.train_on(batch, metrics, timing_raw, is_last_step)
                rollout_data_dir = self.config.trainer.get("rollout_data_dir", None)
                if rollout_data_dir:
                    infos = {
                        k: batch.non_tensor_batch[k] for k in batch.meta_info["reward_extra_keys"]
                    }
                    self._log_rollout_data(batch, infos, timing_raw, rollout_data_dir)

            if self.config.trainer.test_freq > 0 and (
                is_last_step or self.global_steps % self.config.trainer.test_freq == 0
            ):
                with marked_timer("testing", timing_raw, color="green"):
                    metrics.update(self._validate())

            metrics.update(
                {"training/global_step": self.global_steps, "training/epoch": self.allocator.epoch}
            )
            metrics.update(compute_data_metrics(batch=batch, use_critic=self.use_critic))
            metrics.update(compute_timing_metrics(batch=batch, timing_raw=timing_raw))
            metrics.update(
                compute_throughout_metrics(
                    batch=batch,
                    timing_raw=timing_raw,
                    n_gpus=self.resource_pool_manager.get_n_gpus(),
                )
            )
            logger.log(data=metrics, step=self.global_steps)
            self.global_steps += 1
            _skip_manager("set_step", self.global_steps)
            if is_last_step:
                break
        self._shutdown_dump_executor()

    # ------------------------------------------------------------------ checkpoint

    def _rollalloc_dir(self, global_step_folder: str) -> str:
        return os.path.join(global_step_folder, CKPT_DIR)

    def _save_checkpoint(self):
        """verl's checkpoint plus, in global_step_{n}/rollalloc/, the allocator state and the
        rollouts it still holds (Pilot-Commit's buffer). Written before verl's tracker file, so a
        checkpoint verl considers complete always has them."""
        if self.save_allocator_state:
            folder = os.path.join(
                self.config.trainer.default_local_dir, f"global_step_{self.global_steps}"
            )
            d = self._rollalloc_dir(folder)
            os.makedirs(d, exist_ok=True)
            state = self.allocator.state_dict()
            save_state(os.path.join(d, "allocator.npz"), state)
            self.rollout_store.save(os.path.join(d, "rollouts"))
            meta = {
                "global_steps": self.global_steps,
                "strategy": self.allocator.name,
                "allocator_step": self.allocator.step,
                "live_handles": len(self.rollout_store),
                "reward_extra_keys": self._reward_extra_keys,
            }
            with open(os.path.join(d, "meta.json"), "w") as f:
                json.dump(meta, f)
        super()._save_checkpoint()

    def _resume_folder(self) -> str | None:
        trainer_cfg = self.config.trainer
        if trainer_cfg.resume_mode == "disable":
            return None
        if trainer_cfg.resume_mode == "resume_path":
            folder = trainer_cfg.resume_from_path
        else:
            root = trainer_cfg.default_local_dir
            if not os.path.isabs(root):
                root = os.path.join(os.getcwd(), root)
            folder = find_latest_ckpt_path(root)
        if folder is not None and not os.path.isabs(folder):
            folder = os.path.join(os.getcwd(), folder)
        return folder

    def _load_checkpoint(self):
        result = super()._load_checkpoint()
        if self.global_steps == 0 or not self.save_allocator_state:
            return result
        folder = self._resume_folder()
        d = self._rollalloc_dir(folder) if folder else None
        if d is None or not os.path.isfile(os.path.join(d, "allocator.npz")):
            raise FileNotFoundError(
                f"resuming from {folder}: it has no rollalloc state ({CKPT_DIR}/allocator.npz); it was "
                "not written by RollallocRayPPOTrainer, or with rollalloc.checkpoint=false. Start a "
                "fresh run, or set rollalloc.checkpoint=false to resume with a fresh allocator"
            )
        self.allocator.load_state_dict(load_state(os.path.join(d, "allocator.npz")))
        self.rollout_store = RolloutStore.load(os.path.join(d, "rollouts"))
        with open(os.path.join(d, "meta.json")) as f:
            self._reward_extra_keys = list(json.load(f).get("reward_extra_keys", []))
        held = set(self.allocator.state_dict()["live"].tolist())
        stored = set(self.rollout_store.live_handles().tolist())
        if not held <= stored:
            missing = sorted(held - stored)[:5]
            raise ValueError(
                f"resuming from {folder}: the allocator holds handles {missing} that are not stored"
            )
        return result


def _skip_manager(method: str, arg: Any) -> None:
    """verl's SkipManager (rollout skipping for debugging), called as its fit does, where present."""
    try:
        from verl.utils.skip.skip_manager import SkipManager
    except ImportError:  # pragma: no cover - older/newer verl
        return
    getattr(SkipManager, method)(arg)
