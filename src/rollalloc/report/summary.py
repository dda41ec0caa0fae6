"""summary.json (schema rollalloc.summary/2, BENCHMARKS.md) from the runs of a comparison.

Schema /2 keeps every key of /1 with its meaning and adds bootstrap intervals over seeds
(`rollalloc.report.bootstrap`), verdicts, the baseline's gain and `warnings`; docs/benchmarks.md
lists the keys. Rollouts to target are interpolated between evaluations (`curves.crossing`).

`runs[strategy][seed] = {"evals": [...], "steps": [...]}` with the records of `rollalloc.loop.run`:
an eval record has step, cum_rollouts, cum_tokens, wall_s, accuracy (+ more); a step record is
`StepStats.to_dict()` plus the loop's keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rollalloc.report import bootstrap as bs
from rollalloc.report import curves
from rollalloc.report.levels import level_table

SCHEMA = "rollalloc.summary/2"
READ_SCHEMAS = ("rollalloc.summary/1", "rollalloc.summary/2")  # what `rebuild_report` reads
NO_BASELINE_GAIN = "no speedup is meaningful without a baseline that learned"
REPORTED_FRACTIONS = (0.5, 1.0)
AXES = {"rollouts": "cum_rollouts", "tokens": "cum_tokens", "wall_s": "wall_s"}

Runs = dict[str, dict[int, dict[str, list[dict[str, Any]]]]]


@dataclass
class ReportInputs:
    """What a report is computed from: the runs of a comparison and how to summarise them
    (`build_summary`, `write_report`)."""

    kind: str
    """What ran: "simulate", "train", ..."""
    task: str
    """The task or simulated pool the runs trained on."""
    seeds: list[int]
    """Seeds of the runs."""
    budget_rollouts: int | None
    """Rollouts per run (None: the runs stopped by steps)."""
    runs: Runs
    """runs[strategy][seed] = {"evals": [...], "steps": [...]}, records of rollalloc.loop.run."""
    strategy_configs: dict[str, Any]
    """Each strategy's allocator config (and any other run configuration), as JSON."""
    baseline: str = "grpo"
    """The strategy whose peak sets the target and that speedups are measured against."""
    fraction: float = 0.9
    """Target accuracy = acc0 + fraction (peak(baseline) - acc0)."""
    extra: dict[str, Any] | None = None
    """More run details, shown in the report (e.g. the warm start)."""
    bootstrap_resamples: int = bs.DEFAULT_RESAMPLES
    """Bootstrap resamples of the seeds (each strategy independently)."""
    bootstrap_seed: int = bs.DEFAULT_SEED
    """Seed of the bootstrap's RNG."""
    level: float = bs.DEFAULT_LEVEL
    """Level of the percentile intervals."""


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
    """The smoothed curves of every strategy on one common grid per axis (for summary and plots).

    The grid's spacing is the median evaluation spacing of the `baseline`'s runs (of every run
    without one), so that a comparison of A and B does not move when a strategy C is added."""

    def __init__(self, runs: Runs, baseline: str | None = None):
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
            grid = curves.baseline_grid(flat, xs.get(baseline, []))
            self.grid[axis] = grid
            for s, by_seed in runs.items():
                ys = [_column(r["evals"], "accuracy") for r in by_seed.values()]
                self.per_seed[axis][s], self.mean[axis][s] = curves.seed_curves(xs[s], ys, grid)

    def crossings(
        self, axis: str, strategy: str, target: float
    ) -> tuple[tuple[float | None, str], list[tuple[float | None, str]]]:
        """(x, status) of the seed-mean curve and of every seed (`curves.crossing`, interpolated
        between evaluations); x is None unless the status is "reached"."""
        grid = self.grid[axis]
        if grid is None:
            return (None, curves.NEVER), [(None, curves.NEVER)] * len(self.runs[strategy])

        def one(c: np.ndarray) -> tuple[float | None, str]:
            x, status = curves.crossing(grid, c, target)
            return (x if status == curves.REACHED else None), status

        return one(self.mean[axis][strategy]), [one(c) for c in self.per_seed[axis][strategy]]

    def to_target(
        self, axis: str, strategy: str, target: float
    ) -> tuple[float | None, list[float | None]]:
        """x to target of the seed-mean curve and of every seed: None where it was never reached
        and where the curve started at or above the target (no improvement: never a fake 0)."""
        (x, _), per_seed = self.crossings(axis, strategy, target)
        return x, [v for v, _ in per_seed]


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


SMALL_STEP = 1 / 8
"""A step that trains at most this share of a full step's groups (the strategy's train_prompts,
or where its config does not say, the run's 90th percentile) is small: on both real testbeds one
such step after each full one cost GRPO 1-2 points of held-out accuracy (docs/simulator.md,
"Session 44"). Steps that trained nothing are no update and are not counted."""


def _small_step_share(by_seed: dict[int, dict[str, Any]], config: Any) -> float | None:
    """Seed-mean share of a run's training steps that trained at most SMALL_STEP of a full step's
    groups (None without per-step records)."""
    full = config.get("train_prompts") if isinstance(config, dict) else None
    shares = []
    for r in by_seed.values():
        groups = np.array([float(st["groups"]) for st in r.get("steps", []) if "groups" in st])
        groups = groups[groups > 0]  # a step that trained nothing moved nothing
        if len(groups):
            ref = full if isinstance(full, int) and full > 0 else np.percentile(groups, 90)
            shares.append(float(np.mean(groups <= SMALL_STEP * ref)))
    return float(np.mean(shares)) if shares else None


LATE_DISCARD, DISCARD_RISE = 0.8, 0.2
"""A run that discards at least LATE_DISCARD of its rollouts in the last quarter of its rollouts,
DISCARD_RISE more than in the first, is running out of prompts to train: real Pilot-Commit on the
hard pool (0.55 in the first quarter, 0.92 in the last, once eviction had emptied the learnable
part) ended below GRPO beyond noise on three warm starts (docs/testbed.md, "A third warm start");
DAPO and SPEED-RL discard a steady 0.56-0.68 there."""


def _share_discarded(steps: list[dict[str, Any]]) -> float:
    spent = sum(float(st["rollouts"]) for st in steps)
    return sum(float(st.get("discarded_rollouts", 0)) for st in steps) / spent


def _discarded_quarters(by_seed: dict[int, dict[str, Any]]) -> list[float] | None:
    """Seed-mean [first, last] share of the rollouts discarded (steps.jsonl `discarded_rollouts` over
    `rollouts`) by the steps that end in the first / last quarter of the run's rollouts; None
    without per-step records."""
    out = []
    for r in by_seed.values():
        steps = [st for st in r.get("steps", []) if "cum_rollouts" in st and st.get("rollouts")]
        if not steps:
            continue
        end = float(steps[-1]["cum_rollouts"])
        first = [st for st in steps if st["cum_rollouts"] <= 0.25 * end]
        last = [st for st in steps if st["cum_rollouts"] > 0.75 * end]
        if first and last:  # a run of a few long steps has no quarters
            out.append([_share_discarded(first), _share_discarded(last)])
    return np.mean(out, axis=0).tolist() if out else None


def _evicted_prompts(by_seed: dict[int, dict[str, Any]]) -> float | None:
    """Seed-mean number of prompts a run marked for eviction (the steps' `decisions["evicted"]`,
    Pilot-Commit's exclusion); None where no step of any seed reports the decision."""
    totals, seen = [], False
    for r in by_seed.values():
        marked = [(st.get("decisions") or {}).get("evicted") for st in r.get("steps", [])]
        seen = seen or any(k is not None for k in marked)
        totals.append(sum(int(k) for k in marked if k is not None))
    return float(np.mean(totals)) if seen else None


def _phase_totals(by_seed: dict[int, dict[str, Any]], key: str) -> dict[str, float]:
    """Seed-mean total of a per-step dict (rollouts_by_phase, tokens_by_phase)."""
    totals: dict[str, float] = {}
    for r in by_seed.values():
        for st in r.get("steps", []):
            for ph, v in (st.get(key) or {}).items():
                totals[ph] = totals.get(ph, 0.0) + float(v)
    return {ph: v / len(by_seed) for ph, v in sorted(totals.items())}


def _ci(samples: np.ndarray, level: float, digits: int | None = None) -> list[Any] | None:
    """[lo, hi] of the bootstrap interval for JSON (+inf becomes null: "never"), None without one."""
    ci = bs.interval(samples, level)
    return None if ci is None else [_num(v, digits) for v in ci]


def _baseline_gain(
    cv: Curves, baseline: str, acc0: float, res: bs.Resamples, level: float
) -> dict[str, Any]:
    mean = cv.mean["rollouts"][baseline]
    last = float(mean[~np.isnan(mean)][-1]) if np.any(~np.isnan(mean)) else float("nan")
    final_ci = bs.interval(res.baseline_gain_final, level)
    return {
        "initial": _num(acc0, 6),
        "final": _num(last - acc0, 6),
        "final_ci": None if final_ci is None else [_num(v, 6) for v in final_ci],
        "peak": _num(float(np.nanmax(mean)) - acc0, 6),
        "peak_ci": _ci(res.baseline_gain_peak, level, 6),
        "learned": bool(final_ci is not None and final_ci[0] > 0),
    }


def build_summary(inputs: ReportInputs) -> tuple[dict[str, Any], Curves]:
    """The summary dict of BENCHMARKS.md (plus added keys) and the curves it was computed from.

    Intervals: `bootstrap_resamples` resamples of the seeds (each strategy independently), RNG
    seeded by `bootstrap_seed`, percentile intervals at `level` (rollalloc.report.bootstrap)."""
    runs, baseline, fraction, level = inputs.runs, inputs.baseline, inputs.fraction, inputs.level
    bootstrap_resamples, budget_rollouts, extra = (
        inputs.bootstrap_resamples,
        inputs.budget_rollouts,
        inputs.extra,
    )
    check_runs(runs, baseline)
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"write_report: fraction must be in (0, 1], got {fraction}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"write_report: level must be in (0, 1), got {level}")
    if int(bootstrap_resamples) < 1:
        raise ValueError(
            f"write_report: bootstrap_resamples must be >= 1, got {bootstrap_resamples}"
        )
    cv = Curves(runs, baseline)
    grid = cv.grid["rollouts"]
    if grid is None:
        raise ValueError("write_report: no run has spent any rollouts (cum_rollouts all 0)")
    # the initial policy's accuracy, from the baseline's runs: the target depends on them alone
    acc0 = float(np.mean([r["evals"][0]["accuracy"] for r in runs[baseline].values()]))
    peak = float(np.nanmax(cv.mean["rollouts"][baseline]))
    warnings: list[str] = []

    def target(f: float) -> float:
        return curves.target_value(acc0, peak, f)

    if not peak > acc0:
        warnings.append(
            f"the baseline {baseline!r} never rose above the initial accuracy {acc0:.4f} "
            f"(peak {peak:.4f}): the target is no improvement, so no strategy has rollouts to "
            f"target (null, status 'no_baseline_gain'); {NO_BASELINE_GAIN}"
        )

    # ---- bootstrap over seeds (BENCHMARKS.md section 7)
    counts = bs.seed_counts(  # one draw of the seeds for every resampled statistic
        {s: len(by) for s, by in runs.items()}, int(bootstrap_resamples), int(inputs.bootstrap_seed)
    )
    res = bs.resample(
        {s: [_column(r["evals"], "cum_rollouts") for r in by.values()] for s, by in runs.items()},
        {s: [_column(r["evals"], "accuracy") for r in by.values()] for s, by in runs.items()},
        grid,
        baseline=baseline,
        fraction=fraction,
        tokens={
            s: [_column(r["evals"], "cum_tokens") for r in by.values()] for s, by in runs.items()
        },
        counts=counts,
    )
    single = sorted(s for s, by in runs.items() if len(by) < 2)
    if single:
        warnings.append(
            f"{', '.join(map(repr, single))} ran with one seed: the bootstrap cannot see the seed "
            "noise, so their intervals have no width and their verdicts are 'undefined'"
        )

    strategies: dict[str, Any] = {}
    rtt: dict[str, float | None] = {}
    for s, by_seed in runs.items():
        t = target(fraction)
        (r_all, status), crossed = cv.crossings("rollouts", s, t)
        if not peak > acc0:  # target <= acc0: "reaching" it says nothing
            status, r_all = "no_baseline_gain", None
            crossed = [(None, "no_baseline_gain")] * len(crossed)
        elif status == curves.AT_START:
            warnings.append(
                f"{s!r} starts at or above the target {t:.4f} (its initial accuracy is not below "
                "it): its rollouts to target is null (status 'at_start'), not 0"
            )
        r_seed = [v for v, _ in crossed]
        small = _small_step_share(by_seed, inputs.strategy_configs.get(s))
        if small is not None and small > 0.05:
            warnings.append(
                f"{s!r}: {small:.0%} of its steps trained at most 1/8 of a full step's groups. An "
                "update of a few groups is likely to move the weights about as far as a full one, "
                "mostly in noise: one such step after each full one cost GRPO 1-2 points of held-out "
                "accuracy on both real testbeds (docs/simulator.md, 'Session 44'); a constant "
                "batch avoids it (CERO: fixed_batch=True)"
            )
        quarters = _discarded_quarters(by_seed)
        evicted = _evicted_prompts(by_seed)
        if quarters and quarters[1] >= LATE_DISCARD and quarters[1] - quarters[0] >= DISCARD_RISE:
            warnings.append(
                f"{s!r} discarded {quarters[1]:.0%} of its rollouts in the last quarter of its run "
                f"against {quarters[0]:.0%} in the first: it finds less and less to train. Real "
                "Pilot-Commit did this on the hard pool once eviction had emptied the pool's "
                "learnable part, and ended below GRPO on three warm starts (docs/testbed.md, 'A "
                "third warm start')"
                + (
                    f". It evicted {evicted:,.0f} prompts (seed mean); there Pilot-Commit "
                    "with pilots of 2 and evict=false reached the target as soon and did not "
                    "fall; with pilots of 8 eviction did no harm (docs/testbed.md, 'Eviction "
                    "switched off')"
                    if evicted
                    else ""
                )
            )
        # tokens and seconds spent by the time the target was reached in rollouts: so a
        # strategy that never reached it has no time, and one that did always has one
        k_all, k_seed = _cost_at(by_seed, "cum_tokens", r_all, r_seed)
        w_all, w_seed = _cost_at(by_seed, "wall_s", r_all, r_seed)
        spent = np.mean([f["cum_rollouts"] for f in finals_of(by_seed)])
        rtt[s] = r_all
        finals = [r["evals"][-1] for r in by_seed.values()]
        x_res = res.rollouts[s]
        strategies[s] = {
            "rollouts_to_target": _num(r_all),
            "per_seed_rollouts_to_target": [_num(v) for v in r_seed],
            "tokens_to_target": _num(k_all),
            "wall_s_to_target": _num(w_all, 3),
            "final_accuracy": _num(np.mean([f["accuracy"] for f in finals]), 6),
            "peak_accuracy": _num(np.nanmax(cv.mean["rollouts"][s]), 6),
            "mean_effective_prompt_ratio": _num(_steps_mean(by_seed, "effective_prompt_ratio"), 6),
            "total_rollouts": _num(round(spent)),
            # added keys (/1)
            "seeds": [int(k) for k in by_seed],  # per strategy: a benchmark by precision
            "per_seed_tokens_to_target": [_num(v) for v in k_seed],
            "per_seed_wall_s_to_target": [_num(v, 3) for v in w_seed],
            "per_seed_final_accuracy": [_num(f["accuracy"], 6) for f in finals],
            "mean_group_reward_var": _num(_steps_mean(by_seed, "mean_group_reward_var"), 6),
            "total_tokens": _num(round(np.mean([float(f.get("cum_tokens", 0)) for f in finals]))),
            "steps": _num(round(np.mean([len(r.get("steps", [])) for r in by_seed.values()]))),
            "small_step_share": _num(small, 4),
            "discarded_share_quarters": None
            if quarters is None
            else [_num(q, 4) for q in quarters],
            "evicted_prompts": None if evicted is None else _num(evicted, 1),
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
            # added keys (/2): why a "to target" is null, and the bootstrap intervals
            "to_target_status": status,
            "per_seed_to_target_status": [st for _, st in crossed],
            "rollouts_to_target_ci": _ci(x_res, level),
            "tokens_to_target_ci": _ci(res.tokens.get(s, np.full_like(x_res, np.nan)), level),
            "final_accuracy_ci": _ci(res.final[s], level, 6),
            "never_reached_share": round(bs.never_share(x_res), 4),
            "undefined_share": round(bs.undefined_share(x_res), 4),
        }
    if "oracle" in rtt:
        for s in strategies:
            o, v = rtt["oracle"], rtt[s]
            strategies[s]["ratio_to_oracle"] = (
                None if (o is None or v is None or o <= 0) else float(v / o)
            )

    # ---- comparisons: every ordered pair's speedup interval and verdict; vs the baseline also
    # the final-accuracy difference at equal budget. Without a baseline that learned beyond noise
    # no speedup verdict is given ("undefined"): the target itself is noise.
    gain = _baseline_gain(cv, baseline, acc0, res, level)
    speedup = curves.speedups(rtt)
    speedup_ci: dict[str, dict[str, Any]] = {}
    speedup_verdict: dict[str, dict[str, str]] = {}
    speedup_undefined: dict[str, dict[str, float]] = {}
    for a in runs:
        speedup_ci[a], speedup_verdict[a], speedup_undefined[a] = {}, {}, {}
        for b in runs:
            if a == b:
                continue
            samples = res.speedup(a, b)
            ci = bs.interval(samples, level)
            und = bs.undefined_share(samples)
            v = bs.verdict(ci, 1.0, undefined=und, level=level)
            if not peak > acc0 or not gain["learned"] or a in single or b in single:
                v = bs.UNDEFINED
            speedup_ci[a][b] = None if ci is None else [_num(c, 6) for c in ci]
            speedup_verdict[a][b] = v
            speedup_undefined[a][b] = round(und, 4)
    vs_baseline: dict[str, Any] = {}
    fin = {s: strategies[s]["final_accuracy"] for s in runs}
    for a in runs:
        if a == baseline:
            continue
        d = res.final_diff(a, baseline)
        d_ci = bs.interval(d, level)
        d_verdict = bs.verdict(d_ci, 0.0, level=level, above=bs.HIGHER, below=bs.LOWER)
        if a in single or baseline in single:
            d_verdict = bs.UNDEFINED
        vs_baseline[a] = {
            "speedup": speedup[a][baseline],
            "speedup_ci": speedup_ci[a][baseline],
            "speedup_verdict": speedup_verdict[a][baseline],
            "speedup_undefined_share": speedup_undefined[a][baseline],
            "final_accuracy_diff": (
                None if fin[a] is None or fin[baseline] is None else _num(fin[a] - fin[baseline], 6)
            ),
            "final_accuracy_diff_ci": None if d_ci is None else [_num(c, 6) for c in d_ci],
            "final_accuracy_verdict": d_verdict,
        }

    if peak > acc0 and not gain["learned"]:
        ci = gain["final_ci"]
        warnings.append(
            f"the baseline {baseline!r} did not learn beyond noise: its gain over the initial "
            f"accuracy at the end is {_fmt_num(gain['final'])} with {level:.0%} interval "
            f"[{_fmt_num(ci[0] if ci else None)}, {_fmt_num(ci[1] if ci else None)}], "
            f"whose lower end is <= 0; {NO_BASELINE_GAIN}"
        )
    memorised = (((extra or {}).get("warm_start") or {}).get("memorisation") or {}).get("warning")
    if memorised:  # the warm start measured it (rollalloc.train.warmstart.memorisation_check)
        warnings.append(memorised)
    und_target = float(np.mean(~(res.baseline_gain_peak > 0)))
    if peak > acc0 and und_target > 0:
        warnings.append(
            f"in {und_target:.1%} of the bootstrap resamples the baseline {baseline!r} never rose "
            "above the initial accuracy (no target): those resamples are left out of the intervals"
        )

    levels, level_warnings = level_table(runs, baseline, counts, level)
    warnings.extend(level_warnings)

    targets_at: dict[str, Any] = {}
    for f in sorted({*REPORTED_FRACTIONS, float(fraction)}):
        t = target(f)
        targets_at[repr(float(f))] = {
            "value": t,
            "rollouts_to_target": {
                s: (_num(cv.to_target("rollouts", s, t)[0]) if peak > acc0 else None) for s in runs
            },
        }
    summary = {
        "schema": SCHEMA,
        "kind": inputs.kind,
        "task": inputs.task,
        "seeds": [int(s) for s in inputs.seeds],
        "budget_rollouts": None if budget_rollouts is None else int(budget_rollouts),
        "initial_accuracy": acc0,
        "target": {"value": target(fraction), "fraction": float(fraction), "baseline": baseline},
        "strategies": strategies,
        "speedup": speedup,
        "targets_at": targets_at,
        # added keys (/1)
        "grid_spacing": {
            a: (None if g is None or len(g) < 2 else float(g[1] - g[0])) for a, g in cv.grid.items()
        },
        "strategy_configs": inputs.strategy_configs,
        "extra": extra or {},
        # added keys (/2)
        "interpolation": "linear between evaluations",
        "bootstrap": {
            "resamples": int(bootstrap_resamples),
            "seed": int(inputs.bootstrap_seed),
            "level": float(level),
            "method": "percentile (inverted_cdf); seeds drawn with replacement, independently "
            "per strategy",
        },
        "baseline_gain": gain,
        "speedup_ci": speedup_ci,
        "speedup_verdict": speedup_verdict,
        "speedup_undefined_share": speedup_undefined,
        "vs_baseline": vs_baseline,
        "levels": levels,
        "warnings": warnings,
    }
    return summary, cv


def _fmt_num(v: Any) -> str:
    return "n/a" if v is None else f"{v:+.4f}"
