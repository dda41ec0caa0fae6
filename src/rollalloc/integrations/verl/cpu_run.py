"""verl end to end on CPUs: RollallocRayPPOTrainer, a tiny Qwen2, the arith task, no accelerator.

    python -m rollalloc.integrations.verl.cpu_run --workdir runs/verl-cpu --strategy grpo --steps 3
    python -m rollalloc.integrations.verl.cpu_run ... -- trainer.save_freq=2 <any verl option>

What runs is verl's own stack, selected through its plugin mechanisms (no patch of verl):
- the `cpu` platform (cpu_platform.py: device "cpu", gloo collectives, logical Ray GPUs as worker
  slots) in every process, via VERL_PLATFORM set here before Ray starts;
- verl's TaskRunner, resource pools and `ActorRolloutRefWorker` on `--workers` Ray worker processes
  with the FSDP2 engine on gloo (actor: old log-probs, PPO update, checkpoint);
- verl's agent loop (tokenization, chat template) generating through the `hf_cpu` rollout backend
  (hf_rollout.py: one Ray actor holding the HF model), with verl's naive checkpoint engine syncing
  the trained weights into it after every update;
- verl's reward loop and reward manager (naive) scoring with arith_reward.py, verl's advantage
  estimator, its checkpoints and resume, its file/console logger.

The model is rollalloc's built-in tiny Qwen2 (rollalloc.train.model, character tokenizer, about
0.6M parameters), built from its config and saved as an ordinary HF checkpoint in the work folder
(nothing is downloaded), optionally warm-started by supervised fine-tuning on the pool's answers
(`--warm-steps`), as rollalloc's own testbed does; the data set is written as verl parquet files.
Both are cached in the work folder.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

CHAT_TEMPLATE = "{% for message in messages %}{{ message['content'] }}{% endfor %}"
"""The bare prompt, as rollalloc's own trainer feeds the tiny model (`7+4-0-3=`)."""

DATA_SOURCE = "rollalloc/arith"

STRATEGY_OVERRIDES = {
    # strategy -> (rollout.n = trained group size, rollalloc options)
    "grpo": lambda n: (n, []),
    "dapo": lambda n: (n, []),
    "pilot-commit": lambda n: (
        n,
        [
            f"rollalloc.pilot_commit.n_pilot={max(1, n // 4)}",
            f"rollalloc.pilot_commit.n_commit={n - max(1, n // 4)}",
        ],
    ),
}


def prepare(
    workdir: Path,
    *,
    num_train: int = 512,
    num_eval: int = 64,
    terms: tuple[int, ...] = (2, 3, 4),
    warm_steps: int = 150,
    seed: int = 0,
    log=print,
) -> dict[str, str]:
    """Write the arith data (verl parquet) and the tiny model (HF checkpoint) into `workdir`, once.

    Returns {"train", "val", "model"} paths. A folder prepared with other arguments is rebuilt."""
    import pandas as pd
    import torch
    from tokenizers import AddedToken

    from rollalloc.tasks.arith import make_arith_task
    from rollalloc.train.model import make_char_tokenizer, make_tiny_model, save_policy
    from rollalloc.train.warmstart import WarmStartConfig, sft

    workdir = Path(workdir)
    paths = {
        "train": str(workdir / "data" / "train.parquet"),
        "val": str(workdir / "data" / "val.parquet"),
        "model": str(workdir / "model"),
    }
    want = {
        "num_train": num_train,
        "num_eval": num_eval,
        "terms": list(terms),
        "warm_steps": warm_steps,
        "seed": seed,
        "format": 2,
    }
    stamp = workdir / "prepared.json"
    if stamp.is_file() and json.loads(stamp.read_text()) == want:
        return paths
    t0 = time.perf_counter()
    task = make_arith_task(
        {"terms": list(terms), "num_train": num_train, "num_eval": num_eval}, seed=seed
    )

    def rows(cols: dict[str, list[Any]]) -> pd.DataFrame:
        return pd.DataFrame(
            [
                {
                    "data_source": DATA_SOURCE,
                    "prompt": [{"role": "user", "content": p}],
                    "ability": "math",
                    "reward_model": {"style": "rule", "ground_truth": a},
                    "extra_info": {"index": i, "level": lv},
                }
                for i, (p, a, lv) in enumerate(zip(cols["prompt"], cols["answer"], cols["level"]))
            ]
        )

    (workdir / "data").mkdir(parents=True, exist_ok=True)
    rows(task.train).to_parquet(paths["train"])
    rows(task.eval).to_parquet(paths["val"])
    tokenizer = make_char_tokenizer()
    # verl's agent loop tokenizes with the Qwen "continuous token" builder (picked by model_type):
    # it needs "\n" to be one token and a "<|im_end|>" token. transformers 5 reloads this tokenizer
    # as a (byte-level) Qwen2Tokenizer, so whitespace is made an added token to keep one id per char.
    tokenizer.add_tokens([AddedToken("\n", normalized=False), AddedToken(" ", normalized=False)])
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|im_end|>"]})
    tokenizer.chat_template = CHAT_TEMPLATE
    model = make_tiny_model(len(tokenizer), seed=seed)
    if warm_steps > 0:
        torch.manual_seed(seed)
        sft(
            model,
            tokenizer,
            task,
            # on the pool itself, as this smoke setup was calibrated (pools of 2-4-term chains
            # leave the disjoint split no 2-term examples); the testbeds use warm_start.data
            WarmStartConfig(steps=warm_steps, batch_size=64, warmup_steps=10, data="pool"),
            seed,
            log=log,
        )
    save_policy(model, tokenizer, paths["model"])
    stamp.write_text(json.dumps(want))
    log(f"cpu_run: prepared {workdir} in {time.perf_counter() - t0:.1f} s")
    return paths


def verl_overrides(
    paths: dict[str, str],
    *,
    workdir: Path,
    strategy: str = "grpo",
    steps: int = 3,
    workers: int = 2,
    prompts: int = 4,
    n: int = 8,
    response_length: int = 8,
    lr: float = 1e-3,
    minibatches: int = 1,
    seed: int = 0,
) -> list[str]:
    """verl options of a CPU run: `workers` FSDP2 processes on gloo, one hf_cpu rollout server."""
    from rollalloc.integrations.verl.arith_reward import __file__ as reward_file

    if strategy not in STRATEGY_OVERRIDES:
        raise ValueError(f"cpu_run: strategy {strategy!r}: one of {sorted(STRATEGY_OVERRIDES)}")
    group, extra = STRATEGY_OVERRIDES[strategy](n)
    if prompts % minibatches:
        raise ValueError(f"cpu_run: --prompts {prompts} is not a multiple of --minibatches")
    mini = prompts // minibatches  # in prompt groups, as verl counts ppo_mini_batch_size
    micro = max(1, mini * group // workers)
    return [
        f"data.train_files={paths['train']}",
        f"data.val_files={paths['val']}",
        f"data.train_batch_size={prompts}",
        "data.max_prompt_length=32",
        f"data.max_response_length={response_length}",
        "data.filter_overlong_prompts=false",
        "data.dataloader_num_workers=0",
        f"data.seed={seed}",
        f"actor_rollout_ref.model.path={paths['model']}",
        "actor_rollout_ref.model.use_remove_padding=false",
        "+actor_rollout_ref.model.override_config.attn_implementation=sdpa",
        "actor_rollout_ref.actor.strategy=fsdp2",
        "actor_rollout_ref.actor.fsdp_config.dtype=float32",
        "++actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype=fp32",
        "actor_rollout_ref.actor.use_torch_compile=false",
        "actor_rollout_ref.actor.fsdp_config.use_torch_compile=false",
        f"actor_rollout_ref.actor.optim.lr={lr}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={mini}",
        f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={micro}",
        "actor_rollout_ref.actor.use_kl_loss=false",
        "actor_rollout_ref.rollout.name=hf_cpu",
        f"actor_rollout_ref.rollout.tensor_model_parallel_size={workers}",
        f"actor_rollout_ref.rollout.n={group}",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={micro}",
        "actor_rollout_ref.rollout.calculate_log_probs=true",
        "actor_rollout_ref.rollout.temperature=1.0",
        "actor_rollout_ref.rollout.agent.num_workers=1",
        f"actor_rollout_ref.rollout.seed={seed}",
        "algorithm.adv_estimator=grpo",
        "algorithm.use_kl_in_reward=false",
        "reward.num_workers=1",
        f"reward.custom_reward_function.path={reward_file}",
        "reward.custom_reward_function.name=compute_score",
        f"rollalloc.strategy={strategy}",
        *extra,
        f"trainer.n_gpus_per_node={workers}",
        "trainer.nnodes=1",
        "trainer.device=cpu",
        "trainer.logger=[console,file]",
        "trainer.val_before_train=false",
        "trainer.test_freq=-1",
        "trainer.save_freq=-1",
        f"trainer.total_training_steps={steps}",
        f"trainer.default_local_dir={Path(workdir) / 'ckpt'}",
        "trainer.resume_mode=auto",
        "trainer.project_name=rollalloc-verl-cpu",
        f"trainer.experiment_name={strategy}",
        "ray_kwargs.ray_init.num_cpus=16",
        f"+ray_kwargs.ray_init.num_gpus={workers}",
        "+ray_kwargs.ray_init.include_dashboard=false",
    ]


def compose(overrides: list[str]):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from rollalloc.integrations.verl.main import CONFIG_DIR

    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        return hydra_compose(config_name="rollalloc_trainer", overrides=overrides)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m rollalloc.integrations.verl.cpu_run",
        description="rollalloc in verl on CPUs (tiny Qwen2, arith); extra verl options after --",
    )
    p.add_argument("--workdir", default="runs/verl-cpu")
    p.add_argument("--strategy", default="grpo", choices=sorted(STRATEGY_OVERRIDES))
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--workers", type=int, default=2, help="Ray worker processes (FSDP2 ranks)")
    p.add_argument("--prompts", type=int, default=4, help="prompt groups per step")
    p.add_argument("--n", type=int, default=8, help="rollouts per trained group")
    p.add_argument("--response-length", type=int, default=8)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--minibatches", type=int, default=1, help="optimizer steps per training step")
    p.add_argument("--warm-steps", type=int, default=150, help="SFT warm-start steps (0: none)")
    p.add_argument("--num-train", type=int, default=512)
    p.add_argument("--terms", default="2,3,4", help="arith difficulty levels (terms per sum)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per process")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("overrides", nargs="*", help="verl/Hydra options (after --)")
    args = p.parse_args(argv)

    from rollalloc.integrations.verl.cpu_platform import cpu_env

    os.environ.update(cpu_env(args.threads))
    workdir = Path(args.workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("VERL_FILE_LOGGER_PATH", str(workdir / "metrics.jsonl"))
    paths = prepare(
        workdir,
        num_train=args.num_train,
        terms=tuple(int(t) for t in args.terms.split(",")),
        warm_steps=args.warm_steps,
        seed=args.seed,
    )
    overrides = verl_overrides(
        paths,
        workdir=workdir,
        strategy=args.strategy,
        steps=args.steps,
        workers=args.workers,
        prompts=args.prompts,
        n=args.n,
        response_length=args.response_length,
        lr=args.lr,
        minibatches=args.minibatches,
        seed=args.seed,
    )
    config = compose(overrides + list(args.overrides))
    from rollalloc.integrations.verl.main import run

    t0 = time.perf_counter()
    run(config)
    print(f"cpu_run: {args.strategy} done in {time.perf_counter() - t0:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
