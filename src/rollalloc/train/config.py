"""TrainConfig: the single source of truth of a training run, loadable from YAML, overridable
from the CLI. Unknown or mistyped fields raise ValueError naming the field."""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rollalloc.train.learner import LearnerConfig
from rollalloc.train.model import TinyModelConfig
from rollalloc.train.warmstart import WarmStartConfig

MAY_CHANGE_ON_RESUME = {"may_change_on_resume": True}
"""Field metadata of a TrainConfig setting that may differ between a checkpoint and its resume: how
long to run, where and with what to run, what to log. Every other field must match
(`TrainConfig.must_match_on_resume`)."""


@dataclass
class TrainConfig:
    task: str = "arith"
    """'arith', 'reasoning-gym:NAME' or a .jsonl/.json/.parquet file with prompt/answer columns."""
    task_config: dict[str, Any] = field(default_factory=dict)
    """Options of the task (see rollalloc.tasks)."""
    strategy: str = "grpo"
    """Allocation strategy (registry name)."""
    strategy_config: dict[str, Any] = field(default_factory=dict)
    """Strategy options beyond the group size (they override the defaults derived from it)."""
    group_size: int = 8
    """Rollouts per trained group, for every strategy (GRPO/DAPO/posterior-signal n, Pilot-Commit
    n_pilot + n_commit, CERO n_max, SPEED-RL n_screen + n_continue, ...)."""
    pilot_fraction: float = 0.25
    """Pilot-Commit: n_pilot = pilot_fraction * group_size; at 0.25, the strategy's own 1:3 split
    (the paper's 32/96 and 16/48), an ablation knob otherwise."""
    oracle_refresh: int = 1
    """`--strategy oracle` / `oracle-greedy` on a real run: a pool prompt's exact pass rate, which
    the oracle reads, is recomputed once the policy is this many updates newer (1: every step;
    rollalloc.train.evaluator.PoolPassRates). Needs a task whose answer is the completion."""
    train_prompts: int = 64
    """Prompt groups per training step."""
    seed: int = 0
    """Seed of the run: allocator, sampling, mini-batch order."""
    data_seed: int = 0
    """Seed of the task's prompts and of the warm start: the same for every run of a comparison."""
    pool_levels: list[str] | None = None
    """Train only on the pool prompts of these levels (the task's `level` column; a list, or
    `--set pool_levels=4x1d,5x1d`; stored sorted); the warm start and the held-out set are the full
    task's, so the run starts from the same policy as every other run of the config. An ablation
    of the pool: which levels' groups teach which held-out levels (docs/testbed.md, "Which levels
    each strategy teaches"). None: the whole pool."""
    pool_size: int | None = None
    """Train only on this many pool prompts (after pool_levels), a random subset drawn with
    data_seed, the same for every run of a comparison; the warm start and the held-out set are the
    full task's, so the run starts from the same policy. With the budget fixed, a smaller pool means
    more visits of each prompt: GRPO's response to it measures what repeated prompts are worth
    (docs/simulator.md, "Session 32"). None: the whole pool."""
    pool_pick: str = "random"
    """How pool_size's part is chosen: 'random' (drawn with pool_seed) or 'mid': the pool_size
    prompts whose exact pass rate under the warm-started policy is nearest 1/2 (ties: the pool's
    order), the prompts a rank-by-signal strategy favours, measured once before training. Needs
    pool_size and a task whose answer is the completion (arith); run.json's `pool_part` lists
    the chosen prompts (indices into the pool after pool_levels). 'mid-level' / 'mid-answer': the
    same within each value of the task's `level` / `answer` column, every value keeping its share
    of the pool (largest remainders), so that the part differs from a random one by p, not by its
    level mix / answer marginal.
    GRPO on a chosen part against random parts of the same size measures what choosing prompts
    by p does apart from repeating them (docs/simulator.md, "Session 34", "Session 35")."""
    pool_seed: int | None = None
    """Seed of pool_size's random part; None: data_seed. Another value draws another part of the
    same pool from the same warm start (data_seed also seeds the task's prompts and the warm
    start): one part is one draw, and a small part's result can depend on which prompts it holds
    more than on the run seed (docs/simulator.md, "Session 34"). Needs pool_size."""
    model: str = "tiny"
    """'tiny' (built-in tiny Qwen2 + character tokenizer) or a local Hugging Face checkpoint dir."""
    tiny: TinyModelConfig = field(default_factory=TinyModelConfig)
    warm_start: WarmStartConfig = field(default_factory=WarmStartConfig)
    learner: LearnerConfig = field(default_factory=LearnerConfig)
    temperature: float = 1.0
    """Sampling temperature of training rollouts and of the avg@k evaluation."""
    max_new_tokens: int = 8
    """Longest completion in tokens."""
    budget_rollouts: int | None = field(default=None, metadata=MAY_CHANGE_ON_RESUME)
    """Stop once this many rollouts (every phase counted) were generated."""
    max_steps: int | None = field(default=None, metadata=MAY_CHANGE_ON_RESUME)
    """Stop after this many training steps."""
    eval_every_rollouts: int = 8192
    """Evaluate each time cumulative rollouts cross a multiple of this."""
    eval_k: int = 4
    """Samples per held-out prompt for avg@k (0: none, only with eval_metric='exact')."""
    eval_metric: str = "sampled"
    """'sampled': `accuracy` is avg@eval_k; 'exact': `accuracy` is the exact expected avg@k,
    mean P(answer + EOS | prompt) by teacher forcing (no sampling noise; tasks whose answer is the
    completion, e.g. arith; docs/testbed.md)."""
    eval_prompts: int | None = None
    """Use the first eval_prompts of the held-out set (None: all)."""
    eval_greedy: bool = field(default=True, metadata=MAY_CHANGE_ON_RESUME)
    """Also report `accuracy_greedy` (one greedy generation over the held-out set per evaluation;
    never the benchmark's metric, and no effect on training)."""
    log_groups: bool = field(default=False, metadata=MAY_CHANGE_ON_RESUME)
    """Also record every trained group in steps.jsonl (`trained`: prompt ids, group sizes, mean
    reward, success rate and whether its rewards vary, in the batch's order): which prompts a
    strategy trains, and at what success rate (benchmarks/trained_groups.py; docs/testbed.md,
    "Which groups each strategy trains")."""
    log_pass_rates_every: int = field(default=0, metadata=MAY_CHANGE_ON_RESUME)
    """Every this many steps (0: never), the policy's exact pass rate of every pool prompt, read by
    teacher forcing before the step's update, to pass_rates/stepNNNNNN.npy (float32, pool order;
    tasks whose answer is the completion, e.g. arith; ~1.3 s per snapshot of the default testbed's
    4,096 prompts on one core). With log_groups it is the trace that benchmarks/estimate_capture.py
    replays: how much of what knowing p is worth an estimate of p captures (docs/posterior-signal.md,
    "Strata: a prior per level"). Its seconds count in the step's update_s and wall_s."""
    eval_seed: int = 1234
    """Seed of evaluation sampling, reset before every evaluation."""
    checkpoint_every: int = field(default=0, metadata=MAY_CHANGE_ON_RESUME)
    """Checkpoint every this many steps (0: only at the end)."""
    keep_checkpoints: int = field(default=2, metadata=MAY_CHANGE_ON_RESUME)
    """Checkpoints kept on disk (the newest ones); a resume falls back to an older one when the
    newest is damaged."""
    backend: str = "hf"
    """Generation backend: 'hf' (transformers generate, CPU/GPU) or 'vllm' (GPU only)."""
    device: str = field(default="cpu", metadata=MAY_CHANGE_ON_RESUME)
    """torch device of the policy."""
    threads: int = field(default=0, metadata=MAY_CHANGE_ON_RESUME)
    """torch CPU threads (0: torch's default)."""
    out: str = field(default="runs/train", metadata=MAY_CHANGE_ON_RESUME)
    """Run directory: steps.jsonl, evals.jsonl, run.json, checkpoints/."""
    cache_dir: str = field(default=".cache/rollalloc", metadata=MAY_CHANGE_ON_RESUME)
    """Where warm-start checkpoints are cached."""
    progress: bool = field(default=True, metadata=MAY_CHANGE_ON_RESUME)
    """Show a rich progress bar (only on a terminal)."""
    tensorboard: bool = field(default=False, metadata=MAY_CHANGE_ON_RESUME)
    """Also log to TensorBoard (needs `tensorboard`)."""
    wandb: bool = field(default=False, metadata=MAY_CHANGE_ON_RESUME)
    """Also log to Weights & Biases (needs `wandb`)."""

    def strategy_options(
        self, *, constant_batch: bool = False, pass_rates: Any = None
    ) -> dict[str, Any]:
        """Allocator options at equal group size (the comparison rule of BENCHMARKS.md): the
        strategy config's `options_for_group_size`, which `simulate`, verl and TRL use too.
        `constant_batch`: for a trainer that needs train_prompts groups every step (TRL).
        `pass_rates`: the exact pool pass rates (PoolPassRates) that a strategy declaring
        `trainer_options` (the oracles) is wired with; None: a stand-in that only lets the
        options be checked before anything is loaded."""
        from rollalloc.preflight import load_strategy

        cls = load_strategy(self.strategy)
        options = dict(self.strategy_config) if isinstance(self.strategy_config, dict) else {}
        if self.strategy == "pilot-commit" and self.pilot_fraction != PILOT_FRACTION:
            if "n_pilot" not in options and "n_commit" not in options:  # the ablation knob
                options["n_pilot"] = max(1, round(self.pilot_fraction * self.group_size))
        wire = getattr(cls, "trainer_options", None)
        if wire is not None:
            options = {**wire(_pass_rates_unknown if pass_rates is None else pass_rates), **options}
        return cls.Config.options_for_group_size(
            self.group_size,
            train_prompts=self.train_prompts,
            constant_batch=constant_batch,
            **options,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def must_match_on_resume(d: dict[str, Any]) -> dict[str, Any]:
        """The entries of a config dict (`to_dict`, or one a checkpoint saved) that a resume must
        not change: every field not marked MAY_CHANGE_ON_RESUME."""
        may_change = {
            f.name
            for f in dataclasses.fields(TrainConfig)
            if f.metadata.get("may_change_on_resume")
        }
        return {k: v for k, v in d.items() if k not in may_change}


PILOT_FRACTION = 0.25
"""Pilot-Commit's own split (PilotCommitConfig.group_split): the default of `pilot_fraction`."""

PAPER_TESTBED: dict[str, Any] = {
    "task": "arith",
    "task_config": {
        "terms": [1, 2, 3, 4, 5, 6, 7, 3],
        "digits": [4, 1, 1, 1, 1, 1, 1, 3],
        "weights": [3, 1, 1, 1, 1, 1, 1, 5.5],
        "eval_weights": [0, 1, 1, 1, 1, 1, 1, 0],
        "sft_weights": [2, 0, 0, 1, 1, 1, 1, 0],
        "num_train": 2048,
        "num_eval": 1024,
        "num_sft": 16384,
    },
    "group_size": 32,
    "train_prompts": 16,
    "learner": {"num_minibatches": 1},
    "eval_metric": "exact",
    "eval_k": 0,
    "eval_greedy": False,
    "eval_every_rollouts": 4096,
    "budget_rollouts": 98304,
}
"""The paper-regime testbed, the reference benchmark (configs/testbed-paper.yaml spells out the same
values with the reasons; docs/testbed.md): groups of 32 on a pool where 59% of GRPO's groups have
zero variance at the start. `rollalloc demo` runs a reduced version of it."""

SMOKE_TESTBED: dict[str, Any] = {
    "task_config": {"num_train": 96, "num_eval": 32, "terms": [2]},
    "tiny": {
        "hidden_size": 32,
        "num_layers": 1,
        "num_heads": 2,
        "intermediate_size": 64,
        "max_positions": 32,
    },
    "warm_start": {
        "data": "pool",  # its 2-term pool leaves ~80 prompts for a disjoint split
        "steps": 200,
        "batch_size": 64,
        "lr": 0.01,
        "warmup_steps": 2,
        "histogram_prompts": 16,
        "histogram_samples": 4,
    },
    "train_prompts": 4,
    "group_size": 8,
    "max_new_tokens": 4,
    "eval_every_rollouts": 64,
    "eval_k": 2,
    "threads": 1,
    "progress": False,
    "learner": {"lr": 0.001},
}
"""Overrides for a seconds-long run of the arith testbed (a 1-layer model, 96 prompts): what the
trainer tests and the fault-injection benchmark train. Learns a little; measures nothing."""

_NESTED = {"tiny": TinyModelConfig, "warm_start": WarmStartConfig, "learner": LearnerConfig}


class _PassRatesUnknown:
    """The stand-in for PoolPassRates while a config is checked, before the policy is loaded (and
    what a summary's strategy_configs shows)."""

    def __call__(self, prompt_ids: Any) -> Any:
        raise RuntimeError("the exact pool pass rates are wired by trainer.build_parts")

    def __repr__(self) -> str:
        return "exact pool pass rates of the live policy (wired by the trainer)"


_pass_rates_unknown = _PassRatesUnknown()


def _build(cls, values: dict[str, Any], where: str):
    if not isinstance(values, dict):
        raise ValueError(f"{where}: expected a mapping, got {values!r}")
    names = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    for k, v in values.items():
        if k not in names:
            raise ValueError(f"{where}{k}: unknown field (known: {', '.join(names)})")
        if cls is TrainConfig and k in _NESTED:
            v = _build(_NESTED[k], v, f"{where}{k}.")
        kwargs[k] = _coerce(names[k], v, f"{where}{k}")
    return cls(**kwargs)


def _coerce(f: dataclasses.Field, v: Any, name: str) -> Any:
    """Check a scalar against its field's default type; numbers written as strings (YAML reads
    `2e-5` as a string) become floats."""
    default = f.default
    if default is dataclasses.MISSING or v is None:
        return v
    if isinstance(default, bool):
        if not isinstance(v, bool):
            raise ValueError(f"{name} must be true or false, got {v!r}")
    elif isinstance(default, float):
        if isinstance(v, bool):
            raise ValueError(f"{name} must be a number, got {v!r}")
        try:
            return float(v)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a number, got {v!r}") from None
    elif isinstance(default, int):
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"{name} must be an integer, got {v!r}")
    elif isinstance(default, str) and not isinstance(v, str):
        raise ValueError(f"{name} must be a string, got {v!r}")
    return v


def config_from_dict(values: dict[str, Any]) -> TrainConfig:
    levels = values.get("pool_levels")
    if isinstance(levels, str):  # `--set pool_levels=2x1d,3x1d`
        levels = [x.strip() for x in levels.split(",") if x.strip()]
    if isinstance(levels, (list, tuple)) and all(isinstance(x, str) for x in levels):
        values = {**values, "pool_levels": sorted(set(levels))}  # one spelling per pool (resume)
    cfg = _build(TrainConfig, values, "")
    validate(cfg)
    return cfg


def load_config(path: str | Path) -> dict[str, Any]:
    """The mapping in a YAML or JSON config file (a syntax error names the file and line)."""
    from rollalloc.preflight import read_config_file

    data = read_config_file(path)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a config file must hold a mapping")
    return data


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict) and k not in ("task_config",):
            out[k] = merge(out[k], v)
        else:
            out[k] = v
    return out


POOL_PICKS = ("random", "mid", "mid-level", "mid-answer")


def validate(cfg: TrainConfig) -> None:
    def positive(name: str, value: Any, minimum: int = 1) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")

    positive("group_size", cfg.group_size, 2)
    levels = cfg.pool_levels
    if levels is not None and (
        not isinstance(levels, (list, tuple))
        or not levels
        or not all(isinstance(x, str) and x for x in levels)
    ):
        raise ValueError(
            "pool_levels must be a list of level names (non-empty; or a comma-separated string), "
            f"got {levels!r}"
        )
    if cfg.pool_size is not None:
        positive("pool_size", cfg.pool_size)
    if cfg.pool_seed is not None:
        positive("pool_seed", cfg.pool_seed, 0)
        if cfg.pool_size is None:
            raise ValueError("pool_seed needs pool_size (it seeds pool_size's random part)")
    if cfg.pool_pick not in POOL_PICKS:
        raise ValueError(f"pool_pick must be one of {POOL_PICKS}, got {cfg.pool_pick!r}")
    if cfg.pool_pick != "random" and (cfg.pool_size is None or cfg.pool_seed is not None):
        raise ValueError(
            f"pool_pick={cfg.pool_pick!r} needs pool_size (how many prompts to choose) and no "
            "pool_seed (nothing is drawn at random)"
        )
    positive("train_prompts", cfg.train_prompts)
    positive("max_new_tokens", cfg.max_new_tokens)
    positive("eval_every_rollouts", cfg.eval_every_rollouts)
    if cfg.eval_metric not in ("sampled", "exact"):
        raise ValueError(f"eval_metric must be 'sampled' or 'exact', got {cfg.eval_metric!r}")
    positive("eval_k", cfg.eval_k, 0 if cfg.eval_metric == "exact" else 1)
    positive("checkpoint_every", cfg.checkpoint_every, 0)
    positive("log_pass_rates_every", cfg.log_pass_rates_every, 0)
    positive("keep_checkpoints", cfg.keep_checkpoints)
    positive("threads", cfg.threads, 0)
    if cfg.warm_start.seed is not None:
        positive("warm_start.seed", cfg.warm_start.seed, 0)
    if cfg.budget_rollouts is None and cfg.max_steps is None:
        raise ValueError("budget_rollouts or max_steps must be set")
    if cfg.budget_rollouts is not None:
        positive("budget_rollouts", cfg.budget_rollouts)
        if cfg.budget_rollouts < cfg.train_prompts * cfg.group_size:
            raise ValueError(
                f"budget_rollouts={cfg.budget_rollouts} is smaller than one step "
                f"(train_prompts * group_size = {cfg.train_prompts * cfg.group_size} rollouts)"
            )
    if cfg.max_steps is not None:
        positive("max_steps", cfg.max_steps)
    positive("oracle_refresh", cfg.oracle_refresh)
    if cfg.backend not in ("hf", "vllm"):
        raise ValueError(f"backend must be 'hf' or 'vllm', got {cfg.backend!r}")
    if not (0 < cfg.pilot_fraction < 1):
        raise ValueError(f"pilot_fraction must be in (0, 1), got {cfg.pilot_fraction}")
    if not (cfg.temperature > 0):
        raise ValueError(f"temperature must be > 0, got {cfg.temperature}")
    if cfg.learner.temperature not in (1.0, cfg.temperature):
        raise ValueError(
            f"learner.temperature={cfg.learner.temperature} differs from temperature="
            f"{cfg.temperature}: the trainer takes the learner's from `temperature` (the one the "
            "rollouts are sampled at); set only `temperature`"
        )
    if not isinstance(cfg.task_config, dict) or not isinstance(cfg.strategy_config, dict):
        raise ValueError("task_config and strategy_config must be mappings")
