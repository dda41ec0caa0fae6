"""rollalloc's built-in testbed trained through TRL: the same task, warm start, allocator and held-out
evaluation as rollalloc's own trainer (`rollalloc.train`), with TRL doing generation, rewards and the
update. Used by examples/trl_pilot_commit.py and benchmarks/trl_rollouts_to_target.py.

The mapping of rollalloc's `TrainConfig` onto `GRPOConfig` (same algorithm, other implementation):

    group_size, train_prompts      num_generations = group_size,
                                   generation_batch_size = train_prompts * group_size
    learner.num_minibatches        steps_per_generation (one optimizer step per mini-batch,
                                   gradient_accumulation_steps = 1; TRL then recomputes old log-probs
                                   before the update = learner.old_logprobs "recompute")
    learner.lr / weight_decay / warmup_steps / max_grad_norm   the same, constant schedule after warmup
    learner.clip_low / clip_high   epsilon / epsilon_high
    learner.kl_coef                beta
    learner.normalize_std          scale_rewards "group" / "none"
    token-mean loss                loss_type "dapo" (normalised by the batch's completion tokens)
    temperature, max_new_tokens    temperature, max_completion_length (top_k 0, top_p 1)

Evaluation: `CumulativeRolloutEval` runs rollalloc's `HeldOutEvaluator` before training and each
time the allocator's cumulative rollouts cross a multiple of `eval_every_rollouts`, and stops
training once `budget_rollouts` are spent, so curves are accuracy against rollouts, every phase
counted, exactly like `rollalloc train`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from rollalloc.integrations.trl.trainer import RollallocGRPOTrainer


class CumulativeRolloutEval(TrainerCallback):
    """Held-out evaluation against the allocator's cumulative rollouts, and a rollout budget."""

    def __init__(
        self,
        evaluate,
        *,
        eval_every_rollouts: int,
        budget_rollouts: int | None = None,
        evals_path: str | Path | None = None,
        log=print,
    ) -> None:
        if eval_every_rollouts <= 0:
            raise ValueError(f"eval_every_rollouts must be positive, got {eval_every_rollouts}")
        self.evaluate = evaluate
        self.every = int(eval_every_rollouts)
        self.budget = budget_rollouts
        self.evals_path = Path(evals_path) if evals_path else None
        self.log = log
        self.trainer: RollallocGRPOTrainer | None = None
        self.evals: list[dict[str, Any]] = []
        self.next_eval_at = 0
        self._t0 = time.perf_counter()

    def _record(self, state) -> None:
        allocator = self.trainer.allocator
        metrics = self.evaluate()
        rec = {
            "step": int(state.global_step),
            "cum_rollouts": int(allocator.cum_rollouts),
            "cum_tokens": int(allocator.cum_tokens),
            "wall_s": time.perf_counter() - self._t0,
            **{k: float(v) for k, v in metrics.items()},
        }
        self.evals.append(rec)
        if self.evals_path is not None:
            with open(self.evals_path, "a") as f:
                f.write(json.dumps(rec) + "\n")
        self.log(
            f"eval step {rec['step']:4d}  rollouts {rec['cum_rollouts']:8d}  "
            f"accuracy {rec.get('accuracy', float('nan')):.4f}  greedy {rec.get('accuracy_greedy', float('nan')):.4f}"
        )
        while self.next_eval_at <= allocator.cum_rollouts:
            self.next_eval_at += self.every

    def on_train_begin(self, args, state, control, **kwargs):
        if not self.evals:
            self._t0 = time.perf_counter()
            self._record(state)

    def on_step_end(self, args, state, control, **kwargs):
        cum = self.trainer.allocator.cum_rollouts
        if cum >= self.next_eval_at:
            self._record(state)
        if self.budget is not None and cum >= self.budget:
            control.should_training_stop = True
        return control

    def on_train_end(self, args, state, control, **kwargs):
        if self.evals and self.evals[-1]["step"] != state.global_step:
            self._record(state)


def testbed_allocator(cfg, num_prompts: int):
    """The allocator of a TRL run of `cfg` (a TrainConfig): the options `rollalloc train` builds,
    for a constant batch, as TRL trains (no short steps: on_max_rounds="error", CERO's
    fixed_batch=True)."""
    from rollalloc.allocator import make_allocator

    options = cfg.strategy_options(constant_batch=True)
    return make_allocator(cfg.strategy, num_prompts=num_prompts, seed=cfg.seed, **options)


def build_testbed_trainer(
    cfg,
    *,
    output_dir: str | Path,
    budget_rollouts: int,
    grpo_overrides: dict[str, Any] | None = None,
    log=print,
) -> tuple[RollallocGRPOTrainer, CumulativeRolloutEval]:
    """A RollallocGRPOTrainer on rollalloc's testbed for `cfg` (a rollalloc.train.config.TrainConfig)."""
    import torch
    from datasets import Dataset
    from trl import GRPOConfig

    from rollalloc.tasks import part_seed, restrict_pool
    from rollalloc.train.evaluator import HeldOutEvaluator
    from rollalloc.train.model import load_policy
    from rollalloc.train.sampler import HFGenerator
    from rollalloc.train.trainer import build_task, prepare_policy

    if cfg.pool_pick != "random":  # before the warm start: nothing spent
        raise ValueError(
            f"pool_pick={cfg.pool_pick!r}: the TRL testbed draws random parts only (use "
            "rollalloc train for a part the policy chooses)"
        )
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    task = build_task(cfg)
    path, _ = prepare_policy(cfg, task, log=log)  # the cached warm start every strategy starts from
    # as rollalloc's trainer: the pool is cut after the warm start
    task = restrict_pool(
        task, cfg.pool_levels, cfg.pool_size, part_seed(cfg.data_seed, cfg.pool_seed)
    )
    model, tokenizer = load_policy(path, device=cfg.device)
    allocator = testbed_allocator(cfg, task.num_train)
    learner = cfg.learner
    rollouts_per_step = cfg.train_prompts * cfg.group_size
    if rollouts_per_step % learner.num_minibatches:
        raise ValueError(
            f"train_prompts * group_size = {rollouts_per_step} is not divisible by "
            f"learner.num_minibatches = {learner.num_minibatches}"
        )
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    args = dict(
        output_dir=str(output_dir),
        num_generations=cfg.group_size,
        per_device_train_batch_size=rollouts_per_step // learner.num_minibatches,
        gradient_accumulation_steps=1,
        steps_per_generation=learner.num_minibatches,
        # TRL's step count is in optimizer steps; the budget callback stops training earlier
        max_steps=learner.num_minibatches * (budget_rollouts // cfg.train_prompts + 1),
        learning_rate=learner.lr,
        weight_decay=learner.weight_decay,
        warmup_steps=learner.warmup_steps,
        lr_scheduler_type="constant_with_warmup",
        max_grad_norm=learner.max_grad_norm,
        epsilon=learner.clip_low,
        epsilon_high=learner.clip_high,
        beta=learner.kl_coef,
        scale_rewards="group" if learner.normalize_std else "none",
        loss_type="dapo",
        temperature=cfg.temperature,
        top_k=0,
        top_p=1.0,
        max_completion_length=cfg.max_new_tokens,
        seed=cfg.seed,
        use_cpu=cfg.device == "cpu",
        bf16=False,
        report_to=[],
        logging_steps=1,
        save_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    args.update(grpo_overrides or {})
    trainer = RollallocGRPOTrainer(
        model=model,
        reward_funcs=list(task.reward_funcs),
        args=GRPOConfig(**args),
        train_dataset=Dataset.from_dict(task.train),
        processing_class=tokenizer,
        allocator=allocator,
    )
    generator = HFGenerator(model, tokenizer, max_new_tokens=cfg.max_new_tokens, device=cfg.device)
    evaluator = HeldOutEvaluator.from_config(generator, task, cfg)
    callback = CumulativeRolloutEval(
        evaluator.evaluate,
        eval_every_rollouts=cfg.eval_every_rollouts,
        budget_rollouts=budget_rollouts,
        evals_path=output_dir / "evals.jsonl",
        log=log,
    )
    callback.trainer = trainer
    trainer.add_callback(callback)
    return trainer, callback
