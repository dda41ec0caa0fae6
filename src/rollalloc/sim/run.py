"""Run strategies on the simulator through the one driver loop (`rollalloc.loop.run`).

    policy = SimPolicy(preset)                                       same start for every run
    store = RolloutStore()                                           the run's rollouts by handle
    sampler, learner = SimSampler(policy, seed, store), SimLearner(policy, store, seed)
    evaluator = SimEvaluator(policy, seed)                           (rollalloc.sim.roles)
    run(make_allocator(strategy, ...), sampler, learner, evaluator, budget_rollouts=B, ...)

`group_size` N sets every strategy's trained group to N rollouts through its config's
`options_for_group_size` (n; cero: n_max; pilot-commit: n_pilot + n_commit, the reference's 1:3;
speed-rl: n_screen + n_continue, its 4 + 20): the options `rollalloc train` builds. A strategy's own
options win; of a pair one part may be set (pilot-commit.n_pilot=4 with N = 8: 4 + 4); options that
cannot add up to N are refused. A strategy that needs what only the simulator knows (the oracle: the
true success probabilities) declares `simulator_options(policy)`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from rollalloc.allocator import (
    config_to_dict,
    get_strategy,
    make_allocator,
    wire_pool_columns,
)
from rollalloc.loop import LoopState, run
from rollalloc.metrics import concentration
from rollalloc.sim.policy import Preset, SimConfig, SimPolicy
from rollalloc.sim.roles import RolloutStore, SimEvaluator, SimLearner, SimSampler


def strategy_options(
    strategy: str, *, train_prompts: int, group_size: int, options: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Options of one strategy for groups of `group_size` rollouts; its own `options` win."""
    return get_strategy(strategy).Config.options_for_group_size(
        group_size, train_prompts=train_prompts, constant_batch=False, **(options or {})
    )


def simulate_run(
    strategy: str,
    preset: Preset,
    seed: int,
    *,
    budget_rollouts: int,
    eval_every_rollouts: int,
    options: dict[str, Any],
    sim_config: SimConfig | None = None,
    on_step: Callable[[dict[str, Any], Any], None] | None = None,
    max_steps: int | None = None,
    part: Callable[[SimPolicy], Any] | None = None,
) -> dict[str, Any]:
    """One run: returns {"evals", "steps", "config", "stopped", "concentration"} (the last: how
    its rollouts spread over the pool, rollalloc.metrics.concentration).

    A strategy that gives up inside the loop (MaxRoundsError: no batch within its rounds;
    PoolExhaustedError: every prompt evicted), or a run that fails with any other error, ends there:
    the run keeps what it did, gets a final evaluation and `stopped` says "stopped" or "failed", the
    step, the rollouts spent and the error; otherwise `stopped` is None. `part`: the pool prompts
    to train on, chosen from the policy before training (SimPolicy.keep; e.g.
    `lambda pol: pol.nearest_half(512)`, the trainer's pool_pick='mid').
    """
    policy = SimPolicy(preset, sim_config)
    if part is not None:
        policy.keep(part(policy))
    store = RolloutStore()  # the run owns it; sampler and learner share it
    sampler = SimSampler(policy, seed, store)
    learner = SimLearner(policy, store, seed)
    evaluator = SimEvaluator(policy, seed)
    wire = getattr(get_strategy(strategy), "simulator_options", None)
    opts = {**(wire(policy) if wire else {}), **options}
    alloc = make_allocator(strategy, num_prompts=policy.num_prompts, seed=seed, **opts)
    wire_pool_columns(alloc, policy.pool_columns())  # e.g. posterior-signal's strata=level
    state = LoopState()
    steps: list[dict[str, Any]] = []

    def record_step(rec: dict[str, Any], st: LoopState) -> None:
        steps.append(rec)
        if on_step is not None:
            on_step(rec, st)

    try:
        stopped = run(
            alloc,
            sampler,
            learner,
            evaluator,
            budget_rollouts=budget_rollouts,
            eval_every_rollouts=eval_every_rollouts,
            max_steps=max_steps,
            state=state,
            on_step=record_step,
        ).stopped  # a strategy that gave up: rollalloc.loop.run ended the run (defined behaviour)
    except Exception as e:  # noqa: BLE001 - a run that fails must not take the comparison with it
        # a failure (a bug, bad options found late): the run keeps what it did, the reason and the
        # step are reported, and the other runs of the comparison go on
        stopped = (
            f"failed at step {state.step} after {alloc.cum_rollouts:,} rollouts: "
            f"{type(e).__name__}: {e}"
        )
        if state.evals and state.evals[-1]["step"] != state.step:
            try:
                rec = {
                    "step": state.step,
                    "cum_rollouts": alloc.cum_rollouts,
                    "cum_tokens": alloc.cum_tokens,
                    "wall_s": state.wall_s,
                    **evaluator.evaluate(),
                }
                state.evals.append(rec)
            except Exception as e2:  # noqa: BLE001 - the run is over; report it as it stands
                stopped += f" (no final evaluation: {type(e2).__name__}: {e2})"
    return {
        "evals": state.evals,
        "steps": steps,
        "config": config_to_dict(alloc.config),
        "stopped": stopped,
        "concentration": concentration(alloc.table.trials),
    }


def simulate(
    strategies: list[str],
    preset: Preset,
    seeds: list[int],
    *,
    budget_rollouts: int,
    eval_every_rollouts: int,
    train_prompts: int = 128,
    group_size: int = 16,
    options: dict[str, dict[str, Any]] | None = None,
    sim_config: SimConfig | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> tuple[dict[str, dict[int, dict[str, Any]]], dict[str, Any]]:
    """Every strategy x seed. Returns runs[strategy][seed] = {"evals", "steps"} and the configs.

    `progress(strategy, seed, cum_rollouts)` is called after every step.
    """
    options = options or {}
    unknown = sorted(set(options) - set(strategies))
    if unknown:
        raise ValueError(f"options given for strategies not in the run: {unknown}")
    cfg = sim_config if sim_config is not None else preset.sim
    runs: dict[str, dict[int, dict[str, Any]]] = {}
    configs: dict[str, Any] = {}
    for s in strategies:
        opts = strategy_options(
            s, train_prompts=train_prompts, group_size=group_size, options=options.get(s)
        )
        runs[s] = {}
        for seed in seeds:
            cb = None
            if progress is not None:

                def cb(rec, _state, s=s, seed=seed):
                    progress(s, seed, rec["cum_rollouts"])

            r = simulate_run(
                s,
                preset,
                seed,
                budget_rollouts=budget_rollouts,
                eval_every_rollouts=eval_every_rollouts,
                options=opts,
                sim_config=cfg,
                on_step=cb,
            )
            configs[s] = r.pop("config")
            runs[s][seed] = r
    configs["simulator"] = {"preset": preset.name, **asdict(cfg)}
    return runs, configs
