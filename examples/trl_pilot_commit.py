"""Pilot-Commit inside TRL's GRPOTrainer, on rollalloc's built-in testbed (CPU, a few minutes).

    pip install 'rollalloc[trl]'
    python examples/trl_pilot_commit.py                          # pilot-commit, 40k rollouts
    python examples/trl_pilot_commit.py --strategy grpo          # the uniform baseline
    python examples/trl_pilot_commit.py --budget 8000 --resume   # continue from the last checkpoint

What happens:
  1. The `arith` task (chain sums of single digits, 2-7 terms) and the tiny Qwen2 with a character
     tokenizer are built, and warm-started by supervised training (cached in .cache/rollalloc, the
     same checkpoint `rollalloc train` starts from).
  2. A Pilot-Commit allocator over the task's training pool decides each step which prompts get
     how many rollouts: 2 pilot rollouts per new prompt, 6 more for prompts whose pilot accuracy lies
     in [p_lower, 1 - p_upper], groups of 8 trained together; surplus kept prompts wait in a buffer.
  3. `RollallocGRPOTrainer` runs those requests through TRL's own generation and reward function,
     then hands TRL a normal batch of train_prompts x 8 rollouts: TRL computes advantages, the loss
     (loss_type="dapo", token-mean), logging and checkpoints as usual.
  4. Held-out accuracy is logged against cumulative rollouts (pilots and discarded ones counted) in
     <out>/evals.jsonl; TRL's log history, with the rollalloc/* metrics, in <out>/log_history.json.

The settings mirror rollalloc's own trainer (`rollalloc.train.config.TrainConfig`), see
rollalloc.integrations.trl.testbed for the mapping onto GRPOConfig.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from rollalloc.integrations.trl.testbed import build_testbed_trainer
from rollalloc.train.config import TrainConfig


def parse_args(argv: list[str] | None = None) -> tuple[TrainConfig, argparse.Namespace]:
    """The run's TrainConfig and the script's own arguments (budget, resume, out, ...)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--strategy", default="pilot-commit", help="grpo | dapo | pilot-commit | cero")
    ap.add_argument(
        "--budget", type=int, default=40_000, help="rollouts to spend (every phase counted)"
    )
    ap.add_argument("--train-prompts", type=int, default=32, help="groups trained per step")
    ap.add_argument("--group-size", type=int, default=8, help="rollouts per trained group")
    ap.add_argument("--lr", type=float, default=1e-5)
    ap.add_argument(
        "--eval-every", type=int, default=4096, help="evaluate every this many rollouts"
    )
    ap.add_argument("--eval-prompts", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--save-steps", type=int, default=50, help="TRL checkpoint every this many steps"
    )
    ap.add_argument(
        "--resume", action="store_true", help="resume from the last checkpoint in --out"
    )
    ap.add_argument("--out", default=None, help="output dir (default runs/trl_<strategy>)")
    a = ap.parse_args(argv)

    base = TrainConfig()
    cfg = replace(
        base,
        strategy=a.strategy,
        train_prompts=a.train_prompts,
        group_size=a.group_size,
        seed=a.seed,
        threads=a.threads,
        eval_every_rollouts=a.eval_every,
        eval_prompts=a.eval_prompts,
        learner=replace(base.learner, lr=a.lr),
    )
    return cfg, a


def main() -> None:
    cfg, a = parse_args()
    out = Path(a.out or f"runs/trl_{a.strategy}")
    trainer, evals = build_testbed_trainer(
        cfg,
        output_dir=out,
        budget_rollouts=a.budget,
        grpo_overrides={"save_strategy": "steps", "save_steps": a.save_steps},
    )
    last = None
    if a.resume:
        ckpts = sorted(out.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
        last = str(ckpts[-1]) if ckpts else None
        print(f"resuming from {last}" if last else "no checkpoint to resume from: starting fresh")
    trainer.train(resume_from_checkpoint=last)
    (out / "log_history.json").write_text(json.dumps(trainer.state.log_history, indent=1))
    s = trainer.step_stats
    print(
        f"{a.strategy}: {trainer.state.global_step} optimizer steps, {trainer.allocator.cum_rollouts} rollouts "
        f"(generated through TRL: {trainer.rollouts_generated}), mean effective prompt ratio "
        f"{sum(x['effective_prompt_ratio'] for x in s) / max(len(s), 1):.3f}, "
        f"final accuracy {evals.evals[-1]['accuracy']:.4f} (from {evals.evals[0]['accuracy']:.4f})"
    )


if __name__ == "__main__":
    main()
