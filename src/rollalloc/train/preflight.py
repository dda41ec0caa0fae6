"""What `rollalloc train` and `rollalloc compare` check before the warm start and the model load
(minutes on a fresh cache): every bad name, option, device or prompt fails here, in seconds.

    cfg = config_from_dict(...)        fields, types, ranges (rollalloc.train.config.validate)
    check_config(cfg)                  device; strategy name and options (without the pool)
    check_task(cfg, build_task(cfg))   strategy against the pool size; prompt lengths
"""

from __future__ import annotations

from typing import Any

from rollalloc.preflight import check_strategy, load_strategy
from rollalloc.train.config import TrainConfig


def check_device(device: str) -> None:
    """A torch device this torch can use: 'cuda' on a CPU-only torch is refused by name."""
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"device {device!r} is not a torch device (cpu, cuda, cuda:1)") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"device {device!r}: this torch ({torch.__version__}) has no usable CUDA device; "
                "use --device cpu"
            )
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(
                f"device {device!r}: only {torch.cuda.device_count()} CUDA device(s) are visible"
            )
    elif dev.type != "cpu":
        raise ValueError(f"device {device!r}: use cpu or cuda")


def check_config(cfg: TrainConfig) -> None:
    """The checks that need neither the task nor the model: device, strategy and its options."""
    check_device(cfg.device)
    check_strategy(cfg.strategy, cfg.strategy_options())


def check_pass_rate_log(cfg: TrainConfig, task: Any) -> None:
    """log_pass_rates_every needs exact pass rates: a task whose answer is the completion."""
    if cfg.log_pass_rates_every and not getattr(task, "answer_is_completion", False):
        raise ValueError(
            f"log_pass_rates_every={cfg.log_pass_rates_every} reads every pool prompt's exact pass "
            f"rate, which needs a task whose answer is the completion the verifier accepts (e.g. "
            f"arith); task {task.name} is not"
        )


def check_task(cfg: TrainConfig, task: Any) -> None:
    """The checks that need the loaded task: the strategy against the pool size, and the longest
    prompt against the tiny model's context (one token per character); pool_levels and pool_size
    against the task's levels and pool; pool_pick='mid' against a task whose answer is the
    completion (its exact pass rates choose the part; a random part of the same size stands in for
    it in the checks here)."""
    from rollalloc.tasks import part_seed, pick_strata, restrict_pool

    if cfg.pool_pick != "random" and not getattr(task, "answer_is_completion", False):
        raise ValueError(
            f"pool_pick={cfg.pool_pick!r} needs exact pass rates: task {task.name}'s answer column "
            "is not the completion the verifier accepts (arith's is)"
        )
    strata = pick_strata(cfg.pool_pick)
    if strata is not None and strata not in task.train:
        raise ValueError(
            f"pool_pick={cfg.pool_pick!r} keeps each {strata}'s share: task {task.name} has no "
            f"`{strata}` column"
        )

    task = restrict_pool(
        task, cfg.pool_levels, cfg.pool_size, part_seed(cfg.data_seed, cfg.pool_seed)
    )
    scfg = check_strategy(cfg.strategy, cfg.strategy_options(), task.num_train)
    for name in scfg.pool_columns():  # e.g. posterior-signal's strata
        if name.partition(".")[0] not in task.train:  # a dotted name: a field of a dict column
            raise ValueError(
                f"{cfg.strategy}: column {name!r} (pool_columns) is not a column of task "
                f"{task.name} (its columns: {sorted(task.train)})"
            )
    wired = hasattr(load_strategy(cfg.strategy), "trainer_options")
    if wired and not getattr(task, "answer_is_completion", False):
        raise ValueError(
            f"strategy {cfg.strategy} reads every pool prompt's exact pass rate, which needs a "
            f"task whose answer is the completion the verifier accepts (e.g. arith); task "
            f"{task.name} is not"
        )
    check_pass_rate_log(cfg, task)
    if cfg.model != "tiny":
        return
    for split, cols in (("train", task.train), ("eval", task.eval)):
        prompts = cols["prompt"]
        longest = max(range(len(prompts)), key=lambda i: len(prompts[i]))
        n = len(prompts[longest])
        if n + cfg.max_new_tokens > cfg.tiny.max_positions:
            raise ValueError(
                f"task {task.name}: {split} row {longest} has a prompt of {n} characters; with "
                f"max_new_tokens={cfg.max_new_tokens} it does not fit the tiny model's "
                f"tiny.max_positions={cfg.tiny.max_positions}"
            )
