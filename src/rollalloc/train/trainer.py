"""A training run: task + warm-started policy + Sampler/Learner/Evaluator + allocator, through the
one driver loop (rollalloc.loop.run), with logs, checkpoints and resume.

    cfg = TrainConfig(strategy="pilot-commit", budget_rollouts=150_000, out="runs/pc")
    result = train(cfg)                   # or train(cfg, resume=True) after an interruption

Run directory: steps.jsonl (one line per step: the allocator's StepStats, learner metrics, timing),
evals.jsonl (held-out evaluations with cumulative rollouts/tokens/seconds), run.json (config, warm
start pass rates, totals), checkpoints/ (see rollalloc.train.checkpoint).
"""

from __future__ import annotations

import io
import json
import os
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rollalloc.loop import LoopState, run
from rollalloc.metrics import concentration
from rollalloc.state import atomic_write_bytes
from rollalloc.tasks import (
    Task,
    load_task,
    nearest_half,
    part_seed,
    pick_strata,
    pool_subset,
    restrict_pool,
)
from rollalloc.train.checkpoint import (
    load_checkpoint,
    read_checkpoint_meta,
    resumable_checkpoint,
    save_checkpoint,
)
from rollalloc.train.config import TrainConfig, validate
from rollalloc.train.evaluator import HeldOutEvaluator, PoolPassRates, exact_pass_rates
from rollalloc.train.learner import GRPOLearner
from rollalloc.train.model import load_policy, make_char_tokenizer, make_tiny_model
from rollalloc.train.sampler import HFGenerator, RolloutStore, Sampler, VLLMGenerator
from rollalloc.train.warmstart import format_histogram, warm_start
from rollalloc.types import TrainBatch

TIMING_KEYS = ("gen_s", "update_s", "wall_s")
"""Fields of a steps.jsonl record that measure time (and so differ between identical runs)."""


class _GroupLog:
    """The learner, keeping the groups of the batch it last trained (`log_groups`)."""

    def __init__(self, learner):
        self.learner, self.last = learner, None

    def update(self, batch: TrainBatch) -> dict[str, float]:
        edges = np.concatenate([[0], np.cumsum(batch.group_sizes)]).astype(int)
        groups = list(zip(edges[:-1], edges[1:]))
        success = batch.rewards if batch.successes is None else batch.successes
        self.last = {
            "prompt_ids": [int(p) for p in batch.prompt_ids],
            "group_sizes": [int(n) for n in batch.group_sizes],
            "mean_reward": [float(batch.rewards[a:b].mean()) if b > a else 0.0 for a, b in groups],
            "success_rate": [float(success[a:b].mean()) if b > a else 0.0 for a, b in groups],
            # reward variance: the group carries GRPO signal (whatever the reward's scale)
            "varies": [bool(b - a > 1 and np.ptp(batch.rewards[a:b]) > 0) for a, b in groups],
        }
        return self.learner.update(batch)


class _PassRateLog:
    """The learner, saving the policy's exact pass rate of every pool prompt before each
    `every`-th step's update (`log_pass_rates_every`) to `folder`/stepNNNNNN.npy: the p that
    generated that step's rollouts. Teacher forcing draws no random numbers, so the run itself is
    the one it would be without the log."""

    def __init__(self, learner, rates: PoolPassRates, num_prompts: int, every: int, folder: Path):
        self.learner, self.rates, self.every, self.folder = learner, rates, every, folder
        self.ids = np.arange(num_prompts)
        folder.mkdir(parents=True, exist_ok=True)

    def update(self, batch: TrainBatch) -> dict[str, float]:
        if batch.step % self.every == 0:
            buf = io.BytesIO()
            np.save(buf, np.asarray(self.rates(self.ids), dtype=np.float32))
            atomic_write_bytes(self.folder / f"step{batch.step:06d}.npy", buf.getvalue())
        return self.learner.update(batch)


def read_pass_rate_log(run: Path) -> tuple[np.ndarray, np.ndarray]:
    """What `_PassRateLog` wrote in a run directory: the snapshots' steps (T,) in step order and
    the pass rates (T, pool prompts). Raises ValueError when there are none."""
    files = sorted(Path(run, "pass_rates").glob("step*.npy"))
    if not files:
        raise ValueError(f"{run}: no pass_rates/step*.npy; train with log_pass_rates_every > 0")
    steps = np.array([int(f.stem[len("step") :]) for f in files])
    return steps, np.stack([np.load(f) for f in files])


def build_task(cfg: TrainConfig) -> Task:
    return load_task(cfg.task, cfg.task_config, seed=cfg.data_seed)


def prepare_policy(cfg: TrainConfig, task: Task, log=print) -> tuple[Path | None, dict[str, Any]]:
    """The (cached) warm-started checkpoint every run of this task/model/config starts from."""
    seed = cfg.data_seed if cfg.warm_start.seed is None else cfg.warm_start.seed
    if cfg.model == "tiny":

        def build():
            tok = make_char_tokenizer()
            return make_tiny_model(len(tok), cfg.tiny, seed=seed), tok

        payload = {"model": "tiny", "tiny": asdict(cfg.tiny)}
    else:
        if cfg.warm_start.steps == 0:
            return Path(cfg.model), {}
        path = Path(cfg.model).resolve()

        def build():
            return load_policy(path, device=cfg.device)

        stamp = max((p.stat().st_mtime_ns for p in path.iterdir()), default=0)
        payload = {"model": str(path), "model_mtime": stamp}
    payload.update(task=cfg.task, task_config=task.config, max_new_tokens=cfg.max_new_tokens)
    path, meta, _ = warm_start(
        build,
        task,
        cfg.warm_start,
        key_payload=payload,
        cache_dir=cfg.cache_dir,
        seed=seed,
        temperature=cfg.temperature,
        make_generator=lambda m, t: HFGenerator(
            m, t, max_new_tokens=cfg.max_new_tokens, device=cfg.device
        ),
        device=cfg.device,
        log=log,
    )
    return path, meta


@dataclass
class Parts:
    """The roles of a run, wired: the trainer owns `store` and hands it to the Sampler (which adds
    rollouts to it) and the Learner (which reads them); `sync_weights` is the one way an update
    reaches generation."""

    task: Task
    model: Any
    tokenizer: Any
    store: RolloutStore
    sampler: Sampler
    learner: GRPOLearner
    evaluator: HeldOutEvaluator
    allocator: Any
    warm_meta: dict[str, Any]
    pool_part: list[int] | None = None  # pool_pick='mid': the chosen prompts (run.json)

    def sync_weights(self) -> None:
        """The learner's policy (weights and version) to generation: after every update (the
        loop's `sync_weights` hook) and after a checkpoint is restored."""
        self.sampler.sync_weights(self.learner.model, self.learner.version)


def build_parts(cfg: TrainConfig, log=print, task: Task | None = None) -> Parts:
    """The wired roles of a run; `task` is `build_task(cfg)` when a caller has built it already."""
    from rollalloc.allocator import make_allocator, wire_pool_columns
    from rollalloc.preflight import load_strategy
    from rollalloc.train.preflight import check_pass_rate_log

    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    task = task if task is not None else build_task(cfg)
    check_pass_rate_log(cfg, task)  # before the warm start
    path, warm_meta = prepare_policy(cfg, task, log=log)
    # pool_levels / pool_size cut the pool after the warm start: its key and data are the full task's
    full = task.num_train
    cut_seed = part_seed(cfg.data_seed, cfg.pool_seed)
    pick_mid = cfg.pool_pick != "random"  # the policy chooses the part: after it is loaded
    task = restrict_pool(task, cfg.pool_levels, None if pick_mid else cfg.pool_size, cut_seed)
    model, tokenizer = load_policy(path, device=cfg.device)
    pool_part = None
    if pick_mid:
        task, pool_part = mid_part(task, model, tokenizer, cfg)
    if log and (cfg.pool_levels is not None or cfg.pool_size is not None):
        cut = {
            "pool_levels": cfg.pool_levels,
            "pool_size": cfg.pool_size,
            "pool_seed": cfg.pool_seed,
            "pool_pick": cfg.pool_pick if pick_mid else None,
        }
        cut = ", ".join(f"{k} {v}" for k, v in cut.items() if v is not None)
        log(f"{cut}: training on {task.num_train} of {full} pool prompts")
    torch.manual_seed(cfg.seed)
    if cfg.backend == "vllm":
        generator = VLLMGenerator(str(path), tokenizer, max_new_tokens=cfg.max_new_tokens)
    else:
        generator = HFGenerator(
            model, tokenizer, max_new_tokens=cfg.max_new_tokens, device=cfg.device
        )
    store = RolloutStore()
    sampler = Sampler(generator, task, temperature=cfg.temperature, store=store)
    # the learner's log-probs must be of the distribution the rollouts were sampled from
    learner_cfg = replace(cfg.learner, temperature=cfg.temperature)
    learner = GRPOLearner(model, store, learner_cfg, seed=cfg.seed)
    evaluator = HeldOutEvaluator.from_config(generator, task, cfg)
    pass_rates = None
    if hasattr(load_strategy(cfg.strategy), "trainer_options"):  # the oracles read the live p_i
        pass_rates = PoolPassRates(
            model,
            tokenizer,
            task,
            temperature=cfg.temperature,
            version=lambda: learner.version,
            refresh=cfg.oracle_refresh,
            device=cfg.device,
        )
    allocator = make_allocator(
        cfg.strategy,
        num_prompts=task.num_train,
        seed=cfg.seed,
        **cfg.strategy_options(pass_rates=pass_rates),
    )
    wire_pool_columns(allocator, task.train)  # e.g. posterior-signal's strata: a task column
    return Parts(
        task, model, tokenizer, store, sampler, learner, evaluator, allocator, warm_meta, pool_part
    )


def mid_part(task: Task, model, tokenizer, cfg: TrainConfig) -> tuple[Task, list[int]]:
    """pool_pick='mid': the task cut to the cfg.pool_size pool prompts whose exact pass rate under
    `model` is nearest 1/2 (ties: the pool's order), in the pool's order, and their indices;
    'mid-level' / 'mid-answer': the same within each level / answer, each keeping its share
    (rollalloc.tasks.nearest_half)."""
    col = task.train
    p = exact_pass_rates(
        model,
        tokenizer,
        list(col["prompt"]),
        list(col["answer"]),
        temperature=cfg.temperature,
        device=cfg.device,
    )
    strata = pick_strata(cfg.pool_pick)
    keep = nearest_half(p, cfg.pool_size, None if strata is None else col[strata])
    return pool_subset(task, keep), [int(i) for i in keep]


def _truncate_lines(path: Path, n: int) -> None:
    if not path.exists():
        return
    lines = path.read_text().splitlines(keepends=True)[:n]
    path.write_text("".join(lines))


@dataclass
class TrainerState:
    """What the trainer itself keeps between steps (the loop's own state is LoopState)."""

    steps_lines: int
    """Lines in steps.jsonl; a checkpoint records it, and a resume truncates the file to it."""
    last_accuracy: float
    """The latest held-out accuracy (for the progress bar)."""
    reward_failures: int
    """Task.reward_failures when the last step was logged (a step logs how many it added)."""


class _Progress:
    """rich progress bar with live accuracy, rollouts and rollouts/s (no-op off a terminal)."""

    def __init__(self, enabled: bool, total: int, label: str) -> None:
        self.bar = None
        if not enabled:
            return
        try:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
        except ImportError:
            return
        self.bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(),
        )
        self.task = self.bar.add_task(label, total=total, info="")
        self.bar.start()

    def update(self, completed: int, info: str) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=completed, info=info)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


class _Loggers:
    """Optional TensorBoard / W&B sinks (import-guarded)."""

    def __init__(self, cfg: TrainConfig, out: Path) -> None:
        self.tb = self.wb = None
        if cfg.tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.tb = SummaryWriter(str(out / "tensorboard"))
            except ImportError as e:
                raise ValueError("tensorboard: install the `tensorboard` package") from e
        if cfg.wandb:
            try:
                import wandb
            except ImportError as e:
                raise ValueError("wandb: install the `wandb` package") from e
            self.wb = wandb.init(project="rollalloc", config=cfg.to_dict(), dir=str(out))

    def log(self, prefix: str, values: dict[str, Any], x: int) -> None:
        flat = {
            f"{prefix}/{k}": float(v)
            for k, v in values.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)
        }
        if self.tb is not None:
            for k, v in flat.items():
                self.tb.add_scalar(k, v, x)
        if self.wb is not None:
            self.wb.log(flat, step=x)

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
        if self.wb is not None:
            self.wb.finish()


def train(
    cfg: TrainConfig,
    *,
    resume: bool = False,
    log=print,
    parts: Parts | None = None,
    task: Task | None = None,
) -> dict[str, Any]:
    """Run (or continue) a training run; returns the contents of run.json.

    `parts` (from `build_parts(cfg)`) lets a caller keep hold of the model, sampler and allocator;
    `task`, the task a caller already built from `cfg` (the CLI's preflight), is not built again.
    """
    validate(cfg)
    out = Path(cfg.out)
    if not resume and any((out / name).exists() for name in ("steps.jsonl", "run.json")):
        raise ValueError(
            f"{out} already holds a run: continue it with resume=True (--resume), or give a "
            "fresh out directory; a finished run is never overwritten"
        )
    out.mkdir(parents=True, exist_ok=True)
    parts = parts if parts is not None else build_parts(cfg, log=log, task=task)
    steps_path, evals_path = out / "steps.jsonl", out / "evals.jsonl"
    state = LoopState()
    ckpt = resumable_checkpoint(out, log=log) if resume else None
    if resume and ckpt is None:
        log(f"resume: no checkpoint in {out}, starting fresh")
    if ckpt is not None:
        must_match = TrainConfig.must_match_on_resume
        saved, here = must_match(read_checkpoint_meta(ckpt)["config"]), must_match(cfg.to_dict())
        if saved != here:
            diff = sorted(k for k in saved.keys() | here.keys() if saved.get(k) != here.get(k))
            raise ValueError(
                f"resume: {ckpt} was written with another configuration (differs in: "
                f"{', '.join(diff)})"
            )
        meta = load_checkpoint(
            ckpt,
            model=parts.model,
            learner=parts.learner,
            store=parts.store,
            allocator=parts.allocator,
        )
        parts.sync_weights()  # the restored policy reaches generation
        state = LoopState.from_dict(meta["loop"])
        _truncate_lines(steps_path, meta["steps_lines"])
        _truncate_lines(evals_path, len(state.evals))
        for f in (out / "pass_rates").glob("step*.npy"):  # snapshots of steps run again
            if int(f.stem[4:]) >= state.step:
                f.unlink()
        log(f"resume: step {state.step} from {ckpt}")
    else:
        for p in (steps_path, evals_path):
            p.unlink(missing_ok=True)
        for f in (out / "pass_rates").glob("step*.npy"):  # an earlier attempt's snapshots
            f.unlink()
    if parts.warm_meta.get("pass_rates"):
        log(format_histogram(parts.warm_meta["pass_rates"]))
    mem = parts.warm_meta.get("memorisation") or {}
    if mem.get("pool") is not None:
        log(
            f"after warm start: pool pass rate {mem['pool']:.3f}, held-out {mem['held_out']:.3f} "
            f"({mem['measured']}, the eval set's level mix)"
        )
    if mem.get("warning"):
        log("WARNING " + mem["warning"])

    steps_file = open(steps_path, "a")
    evals_file = open(evals_path, "a")
    total = cfg.budget_rollouts or (cfg.max_steps or 0) * cfg.train_prompts * cfg.group_size
    progress = _Progress(cfg.progress and os.isatty(1), total, f"{cfg.strategy} s{cfg.seed}")
    sinks = _Loggers(cfg, out)
    trainer_state = TrainerState(
        steps_lines=sum(1 for _ in open(steps_path)),
        last_accuracy=state.evals[-1]["accuracy"] if state.evals else float("nan"),
        reward_failures=parts.task.reward_failures,
    )

    learner = parts.learner
    if cfg.log_pass_rates_every:  # before the group log: it sees the batch first either way
        rates = PoolPassRates(
            parts.model,
            parts.tokenizer,
            parts.task,
            temperature=cfg.temperature,
            version=lambda: parts.learner.version,
            device=cfg.device,
        )
        learner = _PassRateLog(
            learner, rates, parts.task.num_train, cfg.log_pass_rates_every, out / "pass_rates"
        )
    group_log = _GroupLog(learner) if cfg.log_groups else None
    learner = group_log or learner

    def on_step(rec: dict[str, Any], st: LoopState) -> None:
        if group_log is not None:
            rec["trained"] = group_log.last
        # completions a reward function raised on (scored 0; rollalloc.tasks.Task.score)
        rec["reward_failures"] = parts.task.reward_failures - trainer_state.reward_failures
        trainer_state.reward_failures = parts.task.reward_failures
        steps_file.write(json.dumps(rec) + "\n")
        steps_file.flush()
        trainer_state.steps_lines += 1
        sinks.log(
            "train",
            {**rec["learner"], "effective_prompt_ratio": rec["effective_prompt_ratio"]},
            rec["cum_rollouts"],
        )
        rate = rec["cum_rollouts"] / max(rec["wall_s"], 1e-9)
        progress.update(
            rec["cum_rollouts"],
            f"acc {trainer_state.last_accuracy:.3f}  rollouts "
            f"{rec['cum_rollouts']:,}  {rate:,.0f}/s  step {st.step}",
        )

    def on_eval(rec: dict[str, Any], st: LoopState) -> None:
        evals_file.write(json.dumps(rec) + "\n")
        evals_file.flush()
        trainer_state.last_accuracy = rec["accuracy"]
        sinks.log("eval", rec, rec["cum_rollouts"])
        if not progress.bar:
            log(
                f"[{cfg.strategy} seed {cfg.seed}] step {rec['step']} rollouts "
                f"{rec['cum_rollouts']:,} acc {rec['accuracy']:.3f}"
                + (f" greedy {rec['accuracy_greedy']:.3f}" if "accuracy_greedy" in rec else "")
                + f" ({rec['wall_s']:.0f} s)"
            )

    def checkpoint(st: LoopState) -> None:
        # the loop calls it after a step's evaluation: a resume continues exactly where an
        # uninterrupted run would
        save_checkpoint(
            out,
            st.step,
            model=parts.model,
            learner=parts.learner,
            store=parts.store,
            allocator=parts.allocator,
            meta={
                "loop": st.to_dict(),
                "config": cfg.to_dict(),
                "steps_lines": trainer_state.steps_lines,
            },
            keep=cfg.keep_checkpoints,
        )

    t0 = time.perf_counter()
    try:
        result = run(
            parts.allocator,
            parts.sampler,
            learner,
            parts.evaluator,
            budget_rollouts=cfg.budget_rollouts,
            max_steps=cfg.max_steps,
            eval_every_rollouts=cfg.eval_every_rollouts,
            state=state,
            sync_weights=parts.sync_weights,
            on_step=on_step,
            on_eval=on_eval,
            checkpoint=checkpoint,
            checkpoint_every=cfg.checkpoint_every,
        )
    finally:
        progress.close()
        steps_file.close()
        evals_file.close()
        sinks.close()
    if result.stopped:  # the strategy gave up: run.json says why and where (rollalloc.loop.run)
        log(f"[{cfg.strategy} seed {cfg.seed}] {result.stopped}")
    steps = [json.loads(line) for line in open(steps_path)]
    gen_s = np.array([s["gen_s"] for s in steps]) if steps else np.zeros(1)
    upd_s = np.array([s["update_s"] for s in steps]) if steps else np.zeros(1)
    summary = {
        "config": cfg.to_dict(),
        "warm_start": parts.warm_meta,
        "steps": result.state.step,
        "cum_rollouts": int(parts.allocator.cum_rollouts),
        "cum_tokens": int(parts.allocator.cum_tokens),
        "initial_eval": result.evals[0] if result.evals else None,
        "final_eval": result.evals[-1] if result.evals else None,
        "stopped": result.stopped,
        "concentration": concentration(parts.allocator.table.trials),
        **({"pool_part": parts.pool_part} if parts.pool_part is not None else {}),
        "wall_s": result.state.wall_s,
        "this_process_s": time.perf_counter() - t0,
        "median_gen_s_per_step": float(np.median(gen_s)),
        "median_update_s_per_step": float(np.median(upd_s)),
        "torch_threads": torch.get_num_threads(),
    }
    (out / "run.json").write_text(json.dumps(summary, indent=1))
    return summary
