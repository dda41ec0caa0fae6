"""summary.json (schema rollalloc.summary/1, BENCHMARKS.md) from the runs of a comparison.

`runs[strategy][seed] = {"evals": [...], "steps": [...]}` with the records of `rollalloc.loop.run`:
an eval record has step, cum_rollouts, cum_tokens, wall_s, accuracy (+ more); a step record is
`StepStats.to_dict()` plus the loop's keys.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rollalloc.report import curves

SCHEMA = "rollalloc.summary/1"
REPORTED_FRACTIONS = (0.5, 1.0)
AXES = {"rollouts": "cum_rollouts", "tokens": "cum_tokens", "wall_s": "wall_s"}

Runs = dict[str, dict[int, dict[str, list[dict[str, Any]]]]]


def _column(evals: list[dict[str, Any]], key: str) -> np.ndarray:
    return np.array([float(e.get(key, np.nan)) for e in evals], dtype=np.float64)


def _num(x: float | None, digits: int | None = None) -> float | int | None:
    """JSON-friendly number: None for NaN/None, int for whole rollout counts."""
    if x is None or not np.isfinite(x):
        return None
    if digits is None:
        return int(round(x)) if float(x).is_integer() else float(x)
    return round(float(x), digits)


def spent_vs_budget(spent: Any, budget: Any) -> str:
    """'23,040 of 20,000 (+15.2%)': the rollouts a strategy spent against the budget (a step is
    never cut short, so the last one can overshoot)."""
    if spent is None:
        return "n/a"
    if not budget:
        return f"{spent:,.0f}"
    over = (spent - budget) / budget
    return f"{spent:,.0f} of {budget:,.0f}" + (f" (+{over:.1%})" if over > 0 else "")


def check_runs(runs: Runs, baseline: str) -> None:
    """ValueError naming the problem if `runs` cannot be summarised."""
    if not runs:
        raise ValueError("write_report: runs is empty")
    if baseline not in runs:
        raise ValueError(
            f"write_report: baseline strategy {baseline!r} has no runs (have {sorted(runs)})"
        )
    for s, by_seed in runs.items():
        if not by_seed:
            raise ValueError(f"write_report: strategy {s!r} has no seeds")
        for seed, run in by_seed.items():
            evals = run.get("evals") or []
            if len(evals) < 2:
                raise ValueError(
                    f"write_report: {s!r} seed {seed} has {len(evals)} evaluations, need >= 2"
                )
            for key in ("cum_rollouts", "accuracy"):
                col = _column(evals, key)
                if not np.all(np.isfinite(col)):
                    raise ValueError(
                        f"write_report: {s!r} seed {seed}: eval key {key!r} missing or not finite"
                    )
            if np.any(np.diff(_column(evals, "cum_rollouts")) < 0):
                raise ValueError(f"write_report: {s!r} seed {seed}: cum_rollouts decreases")


class Curves:
    """The smoothed curves of every strategy on one common grid per axis (for summary and plots)."""

    def __init__(self, runs: Runs):
        self.runs = runs
        self.grid: dict[str, np.ndarray | None] = {}
        self.mean: dict[str, dict[str, np.ndarray]] = {a: {} for a in AXES}
        self.per_seed: dict[str, dict[str, np.ndarray]] = {a: {} for a in AXES}
        for axis, key in AXES.items():
            xs = {
                s: [_column(r["evals"], key) for r in by_seed.values()]
                for s, by_seed in runs.items()
            }
            usable = all(
                np.all(np.isfinite(x)) and np.all(np.diff(x) >= 0) for v in xs.values() for x in v
            )
            flat = [x for v in xs.values() for x in v]
            if not usable or max(float(x.max()) for x in flat) <= 0:
                self.grid[axis] = None  # e.g. no token counts reported
                continue
            grid = curves.common_grid(flat)
            self.grid[axis] = grid
            for s, by_seed in runs.items():
                ys = [_column(r["evals"], "accuracy") for r in by_seed.values()]
                self.per_seed[axis][s], self.mean[axis][s] = curves.seed_curves(xs[s], ys, grid)

    def to_target(
        self, axis: str, strategy: str, target: float
    ) -> tuple[float | None, list[float | None]]:
        grid = self.grid[axis]
        if grid is None:
            return None, [None] * len(self.runs[strategy])
        return (
            curves.first_reach(grid, self.mean[axis][strategy], target),
            [curves.first_reach(grid, c, target) for c in self.per_seed[axis][strategy]],
        )


def finals_of(by_seed: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    return [r["evals"][-1] for r in by_seed.values()]


def _cost_at(
    by_seed: dict[int, dict[str, Any]],
    key: str,
    at_all: float | None,
    at_seed: list[float | None],
) -> tuple[float | None, list[float | None]]:
    """`key` (cum_tokens, wall_s) spent when each seed had spent `at` rollouts, interpolated
    between its evaluations: at the seed-mean rollouts to target (mean over seeds) and at each
    seed's own. None where the target was not reached or `key` was not logged."""

    def at(run: dict[str, Any], x: float | None) -> float | None:
        xs, ys = _column(run["evals"], "cum_rollouts"), _column(run["evals"], key)
        if x is None or not np.all(np.isfinite(ys)) or not xs[0] <= x <= xs[-1]:
            return None
        return float(np.interp(x, xs, ys))

    runs = list(by_seed.values())
    each = [at(r, at_all) for r in runs]
    mean = None if any(v is None for v in each) else float(np.mean(each))
    return mean, [at(r, x) for r, x in zip(runs, at_seed)]


def _steps_mean(by_seed: dict[int, dict[str, Any]], key: str) -> float | None:
    vals = [
        np.mean([float(st[key]) for st in r["steps"]]) for r in by_seed.values() if r.get("steps")
    ]
    return float(np.mean(vals)) if vals else None


def _phase_totals(by_seed: dict[int, dict[str, Any]], key: str) -> dict[str, float]:
    """Seed-mean total of a per-step dict (rollouts_by_phase, tokens_by_phase)."""
    totals: dict[str, float] = {}
    for r in by_seed.values():
        for st in r.get("steps", []):
            for ph, v in (st.get(key) or {}).items():
                totals[ph] = totals.get(ph, 0.0) + float(v)
    return {ph: v / len(by_seed) for ph, v in sorted(totals.items())}


def build_summary(
    *,
    kind: str,
    task: str,
    seeds: list[int],
    budget_rollouts: int | None,
    runs: Runs,
    strategy_configs: dict[str, Any],
    baseline: str = "grpo",
    fraction: float = 0.9,
    extra: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], Curves]:
    """The summary dict of BENCHMARKS.md (plus added keys) and the curves it was computed from."""
    check_runs(runs, baseline)
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"write_report: fraction must be in (0, 1], got {fraction}")
    cv = Curves(runs)
    acc0 = float(np.mean([r["evals"][0]["accuracy"] for by in runs.values() for r in by.values()]))
    peak = float(np.nanmax(cv.mean["rollouts"][baseline]))

    def target(f: float) -> float:
        return curves.target_value(acc0, peak, f)

    strategies: dict[str, Any] = {}
    rtt: dict[str, float | None] = {}
    for s, by_seed in runs.items():
        t = target(fraction)
        r_all, r_seed = cv.to_target("rollouts", s, t)
        # tokens and seconds spent by the time the target was reached in rollouts: so a
        # strategy that never reached it has no time, and one that did always has one
        k_all, k_seed = _cost_at(by_seed, "cum_tokens", r_all, r_seed)
        w_all, w_seed = _cost_at(by_seed, "wall_s", r_all, r_seed)
        spent = np.mean([f["cum_rollouts"] for f in finals_of(by_seed)])
        rtt[s] = r_all
        finals = [r["evals"][-1] for r in by_seed.values()]
        strategies[s] = {
            "rollouts_to_target": _num(r_all),
            "per_seed_rollouts_to_target": [_num(v) for v in r_seed],
            "tokens_to_target": _num(k_all),
            "wall_s_to_target": _num(w_all, 3),
            "final_accuracy": _num(np.mean([f["accuracy"] for f in finals]), 6),
            "peak_accuracy": _num(np.nanmax(cv.mean["rollouts"][s]), 6),
            "mean_effective_prompt_ratio": _num(_steps_mean(by_seed, "effective_prompt_ratio"), 6),
            "total_rollouts": _num(round(spent)),
            # added keys
            "per_seed_tokens_to_target": [_num(v) for v in k_seed],
            "per_seed_wall_s_to_target": [_num(v, 3) for v in w_seed],
            "per_seed_final_accuracy": [_num(f["accuracy"], 6) for f in finals],
            "mean_group_reward_var": _num(_steps_mean(by_seed, "mean_group_reward_var"), 6),
            "total_tokens": _num(round(np.mean([float(f.get("cum_tokens", 0)) for f in finals]))),
            "steps": _num(round(np.mean([len(r.get("steps", [])) for r in by_seed.values()]))),
            "rollouts_by_phase": {
                k: _num(round(v)) for k, v in _phase_totals(by_seed, "rollouts_by_phase").items()
            },
            # rollouts spent beyond the budget (the last step is never cut short)
            "budget_overshoot_rollouts": (
                None if not budget_rollouts else _num(round(max(0.0, spent - budget_rollouts)))
            ),
            "discarded_rollouts": _num(
                round(
                    np.mean(
                        [
                            sum(int(st.get("discarded_rollouts", 0)) for st in r.get("steps", []))
                            for r in by_seed.values()
                        ]
                    )
                )
            ),
        }
    if "oracle" in rtt:
        for s in strategies:
            o, v = rtt["oracle"], rtt[s]
            strategies[s]["ratio_to_oracle"] = (
                None if (o is None or v is None or o <= 0) else float(v / o)
            )
    targets_at: dict[str, Any] = {}
    for f in sorted({*REPORTED_FRACTIONS, float(fraction)}):
        t = target(f)
        targets_at[repr(float(f))] = {
            "value": t,
            "rollouts_to_target": {s: _num(cv.to_target("rollouts", s, t)[0]) for s in runs},
        }
    summary = {
        "schema": SCHEMA,
        "kind": kind,
        "task": task,
        "seeds": [int(s) for s in seeds],
        "budget_rollouts": None if budget_rollouts is None else int(budget_rollouts),
        "initial_accuracy": acc0,
        "target": {"value": target(fraction), "fraction": float(fraction), "baseline": baseline},
        "strategies": strategies,
        "speedup": curves.speedups(rtt),
        "targets_at": targets_at,
        # added keys
        "grid_spacing": {
            a: (None if g is None or len(g) < 2 else float(g[1] - g[0])) for a, g in cv.grid.items()
        },
        "strategy_configs": strategy_configs,
        "extra": extra or {},
    }
    return summary, cv
