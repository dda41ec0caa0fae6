"""Fit the simulator preset `testbed-arith` to a real testbed comparison, then put the simulated and
the real speedups of the strategies side by side (docs/simulator.md, "`testbed-arith`").

    python benchmarks/fit_testbed_preset.py fit runs/cmp3
        # -> src/rollalloc/sim/presets/testbed-arith.json
    python benchmarks/fit_testbed_preset.py compare runs/cmp3 --out runs/sim-testbed-arith
        # -> runs/sim-testbed-arith/{summary.json, report.html, sim_vs_real.md, ...}

The input is a directory written by `rollalloc compare --task arith` (OUT/runs/STRATEGY/seedN/ with
run.json, evals.jsonl, steps.jsonl; OUT/summary.json). Nothing is hard-coded to one comparison:
sizes, budget, group size and evaluation points are read from its run.json files.

`fit`, what is fitted to what:

1. Pool. num_prompts = the task's num_train; sim.eval_prompts = the held-out prompts the real runs
   were evaluated on (eval_prompts, else num_eval); sim.ref_group_size = the real group size.
2. Initial pass rates. The warm start measures the pass rate of the first pool prompts (256) with
   16 samples each and counts the observed rates k/16 in the bins 0 | (0,.25] | (.25,.5] | (.5,.75]
   | (.75,1) | 1 (run.json warm_start.pass_rates). `--histogram binned` copies them: a ranged label
   becomes [lo, hi] (the simulator draws p uniformly inside, so open or closed edges do not matter)
   and 0 / 1 become the point bins [0, 0] / [1, 1], which the simulator reads as "never / always
   solved when measured" (log-uniform tails). That overstates the extremes, because measured rates
   are noisier than true ones: a prompt of true p = 0.95 shows 16/16 44% of the time, so the binned
   pool, measured again with 16 samples, shows about 3x the measured share of always-solved prompts
   and far more zero-variance groups than real GRPO sees. `--histogram deconvolved` (the default)
   instead fits true-p bins of width 1/samples (plus the two point bins) whose measurement with the
   same number of samples reproduces the measured counts: EM (Richardson-Lucy) iterations on the
   multinomial likelihood, started from the binned histogram.
3. Learning speed, from the real GRPO runs only (never another strategy: the simulator has to
   predict those). The simulated GRPO runs with the real budget, train_prompts, group size,
   evaluation spacing and seeds; two scale factors are fitted by least squares:
   - k_g on (global_gain, cluster_gain), keeping SimConfig's default ratio: seed-mean held-out
     accuracy gain over the initial accuracy at every evaluation point;
   - k_m on memorize_gain: seed-mean train-reward gain. GRPO samples the pool uniformly, so a step's
     mean reward estimates the pool's pass rate at that step: real `learner.reward_mean` averaged per
     evaluation interval, simulated the pool's mean p at the interval's two ends; both relative to
     the first interval. Skipped (k_m = 1) if the real steps have no reward_mean.
   Each is a log-grid search (factor 2^0.5 over 2^-6..2^4, k_m also tries 0; then 2^(1/8) around
   the best): k_g, k_m, then both once more on a 2^(1/16) grid with the other fixed. A fit of
   k_m = 0 means the real train reward rises no faster than transfer alone explains (no
   memorisation measurable at this budget), not that the simulator needs none elsewhere.

`compare` runs the simulator on the preset for every strategy of the real summary.json (or
--strategies; the real seeds, budget, batch and group size; each strategy's options as the real
trainer derived them, TrainConfig.strategy_options -> options_for_group_size, e.g. pilot-commit's
on_max_rounds="train"), writes the usual report (summary.json) to --out and prints / writes
sim_vs_real.md (and sim_vs_real.json): rollouts to target, speedup vs GRPO, final accuracy, gain
over the initial accuracy and mean effective prompt ratio, real next to simulated; then the
prediction check: the speedup's relative error (sim / real - 1) where both sides reach the target,
the two rankings and their Kendall tau. The target is defined the same way on both sides (the real
summary's fraction, default 0.9, of the baseline's gain, each on its own curves).

Ranking (`rank_key`): by seed-mean rollouts to target, ascending; a strategy that never reaches the
target ranks after every one that does; ties (equal rollouts, which the evaluation grid makes
common, or both "never") are broken by the seed-mean final accuracy, higher first, then by name.
That gives a strict order on each side; Kendall tau (`kendall_tau`, tau-b, = tau-a without ties)
compares the two orders over the strategies present on both sides.

`fit --base-preset P` (fit_levels) fits a preset with levels instead (benchmarks/design_testbed.py
--levels: the real pool and held-out set level by level) to the finished real GRPO runs of one or
more comparisons (--also): the plasticity of the warm-started levels with k_g on the overall and
per-level held-out gain, k_m on the train reward, noise_scale on the seed-to-seed spread
(--fit-noise); docs/simulator.md, "Predicting the paper-regime testbed". `check SIM REAL` puts a
`rollalloc simulate` output's speedups next to a real summary's: Kendall tau-b of the speedups
(never = 0) and each ratio sim / real.

`--set sim.FIELD=VALUE` (fit and compare, repeatable) sets a SimConfig field, e.g. the switchable
effects of docs/simulator.md (`sim.loss_norm=token_mean`, `sim.optimizer=rms`,
`sim.noise_scale=128`, `sim.memo_decay=0.001`). Given to `fit`, the field is written into the
preset and k_g, k_m are fitted to GRPO with it on (a variant is fitted on GRPO like the base model,
never on another strategy); given to `compare`, it overrides the preset's value.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from rollalloc.report import curves
from rollalloc.sim.policy import SimConfig, preset_from_dict
from rollalloc.tasks.arith import ArithConfig

ROOT = Path(__file__).resolve().parents[1]
PRESET_NAME = "testbed-arith"
PRESET_PATH = ROOT / "src/rollalloc/sim/presets" / f"{PRESET_NAME}.json"
STRATEGIES = ["grpo", "dapo", "pilot-commit", "cero"]  # when the real summary lists none
SPEEDUP_TOLERANCE = 0.25  # issue 15's floor: every real speedup within 25%
TAU_FLOOR = 0.7  # issue 15's floor: Kendall tau of the rankings >= 0.7
DEFAULTS = SimConfig()  # the gains' default values and ratios
LEVEL_KEY = re.compile(r"\d+x\d+d")  # a task level's name in evals.jsonl: accuracy_2x1d


# --------------------------------------------------------------------- the real comparison


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def read_comparison(cmp_dir: str | Path) -> dict[str, dict[int, dict[str, Any]]]:
    """runs[strategy][seed] = {"run": run.json, "evals": [...], "steps": [...]} of CMP/runs/S/seedN."""
    root = Path(cmp_dir) / "runs"
    if not root.is_dir():
        raise SystemExit(f"{cmp_dir}: no runs/ directory (expected a `rollalloc compare` output)")
    runs: dict[str, dict[int, dict[str, Any]]] = {}
    for sdir in sorted(p for p in root.iterdir() if p.is_dir()):
        for d in sorted(sdir.glob("seed*")):
            if (d / "run.json").is_file() and d.name[4:].isdigit():
                runs.setdefault(sdir.name, {})[int(d.name[4:])] = {
                    "run": json.loads((d / "run.json").read_text()),
                    "evals": read_jsonl(d / "evals.jsonl"),
                    "steps": read_jsonl(d / "steps.jsonl"),
                }
    if "grpo" not in runs:
        raise SystemExit(f"{cmp_dir}: no grpo runs (the fit and the speedups need GRPO)")
    return runs


def testbed_shape(run: dict[str, Any]) -> dict[str, int]:
    """Pool size, held-out size and batch shape of a real run (run.json); task defaults if absent."""
    cfg = run["config"]
    task_cfg = {  # the warm start records the task's full config; the run's own overrides
        **(run.get("warm_start", {}).get("payload", {}).get("task_config") or {}),
        **(cfg.get("task_config") or {}),
    }
    defaults = ArithConfig()
    num_eval = int(task_cfg.get("num_eval", defaults.num_eval))
    eval_prompts = cfg.get("eval_prompts")
    return {
        "num_prompts": int(task_cfg.get("num_train", defaults.num_train)),
        "eval_prompts": min(int(eval_prompts), num_eval) if eval_prompts else num_eval,
        "group_size": int(cfg["group_size"]),
        "train_prompts": int(cfg["train_prompts"]),
        "budget_rollouts": int(cfg.get("budget_rollouts") or run["cum_rollouts"]),
        "eval_every_rollouts": int(cfg["eval_every_rollouts"]),
    }


def real_strategy_options(runs: dict[str, Any], strategy: str, base: dict[str, Any]) -> dict:
    """The allocator options the real trainer used for `strategy` (TrainConfig.strategy_options of
    one of its runs; from the GRPO run's config with the strategy swapped if it has none)."""
    from rollalloc.train.config import config_from_dict  # imports torch: only when needed

    if strategy in runs:
        cfg = next(iter(runs[strategy].values()))["run"]["config"]
    else:
        cfg = {**base["config"], "strategy": strategy, "strategy_config": {}}
    return config_from_dict(cfg).strategy_options()


def parse_set(items: list[str] | None) -> dict[str, Any]:
    """['sim.noise_scale=128', 'sim.loss_norm=token_mean'] -> {'noise_scale': 128, ...}: JSON
    values where they parse (numbers, true/false/null), strings otherwise; fields are checked
    against SimConfig."""
    fields = set(SimConfig.__dataclass_fields__)
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        name = key.strip().removeprefix("sim.")
        if not sep or name not in fields:
            raise SystemExit(f"--set {item!r}: expected sim.FIELD=VALUE with a SimConfig field")
        try:
            out[name] = json.loads(value)
        except json.JSONDecodeError:
            out[name] = value
    return out


# --------------------------------------------------------------------- ranking


def kendall_tau(x: list[float], y: list[float]) -> float:
    """Kendall's tau-b of two paired score lists (= tau-a when neither has ties):
    (concordant - discordant) / sqrt((n0 - ties_x) (n0 - ties_y)), n0 = n (n - 1) / 2. NaN if
    either list is constant or has fewer than two items."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError("kendall_tau: two lists of equal length")
    iu = np.triu_indices(len(a), k=1)
    sa = np.sign(a[:, None] - a[None, :])[iu]  # one entry per unordered pair
    sb = np.sign(b[:, None] - b[None, :])[iu]
    denom = math.sqrt(float(np.count_nonzero(sa)) * float(np.count_nonzero(sb)))
    return float(np.sum(sa * sb) / denom) if denom > 0 else float("nan")


def rank_key(row: dict[str, Any] | None, name: str) -> tuple[float, float, str]:
    """Sort key of one strategy's summary row: rollouts to target (never -> inf), then final
    accuracy (higher first), then the name."""
    if row is None:
        return (math.inf, math.inf, name)
    rtt = row.get("rollouts_to_target")
    acc = row.get("final_accuracy")
    return (
        math.inf if rtt is None else float(rtt),
        -float(acc) if acc is not None else math.inf,
        name,
    )


def ranking(summary: dict[str, Any], strategies: list[str]) -> list[str]:
    """`strategies` best first by rank_key on `summary`."""
    return sorted(strategies, key=lambda s: rank_key(summary["strategies"].get(s), s))


def speedup_of(summary: dict[str, Any], s: str, base: str) -> float | None:
    """Seed-mean rollouts to target of `base` over that of `s` (None: either never reaches it)."""
    rows = summary["strategies"]
    a = (rows.get(s) or {}).get("rollouts_to_target")
    b = (rows.get(base) or {}).get("rollouts_to_target")
    return None if not a or not b else float(b) / float(a)


def prediction_check(real: dict, sim: dict, strategies: list[str]) -> dict[str, Any]:
    """Speedup errors and rankings, real vs simulated (see the module docstring, "Ranking")."""
    base = real["target"]["baseline"]
    common = [s for s in strategies if s in real["strategies"] and s in sim["strategies"]]
    rank_real, rank_sim = ranking(real, common), ranking(sim, common)
    pos_r = {s: i + 1 for i, s in enumerate(rank_real)}
    pos_s = {s: i + 1 for i, s in enumerate(rank_sim)}
    tau = kendall_tau([pos_r[s] for s in common], [pos_s[s] for s in common])
    acc = [  # supplementary: the order at equal budget (final accuracy alone)
        [x["strategies"][s].get("final_accuracy") or 0.0 for s in common] for x in (real, sim)
    ]
    tau_final = kendall_tau(*acc)
    rows = {}
    for s in common:
        r, m = speedup_of(real, s, base), speedup_of(sim, s, base)
        if s == base:
            verdict = "baseline"
        elif r is not None and m is not None:
            verdict = "ok" if abs(m / r - 1.0) <= SPEEDUP_TOLERANCE else "miss"
        elif r is None and m is None:
            verdict = "both never"
        else:
            verdict = "miss (reached on one side only)"
        rows[s] = {
            "real_speedup": r,
            "sim_speedup": m,
            "rel_error": None if r is None or m is None else m / r - 1.0,
            "verdict": verdict,
            "rank_real": pos_r[s],
            "rank_sim": pos_s[s],
        }
    speedups_ok = all(v["verdict"] in ("ok", "baseline", "both never") for v in rows.values())
    return {
        "strategies": rows,
        "ranking_real": rank_real,
        "ranking_sim": rank_sim,
        "kendall_tau": tau,
        "kendall_tau_final_accuracy": tau_final,
        "tau_floor_holds": bool(tau >= TAU_FLOOR),
        "speedup_floor_holds": speedups_ok,
        "speedups_defined": sum(v["real_speedup"] is not None for v in rows.values()) - 1,
    }


def check_table(check: dict[str, Any], base: str) -> str:
    """Markdown: per strategy speedup real / sim / relative error and the two ranks."""
    f = lambda v, spec: "never" if v is None else format(v, spec)  # noqa: E731
    lines = [
        f"| strategy | real speedup vs {base} | sim speedup | rel. error | within "
        f"{SPEEDUP_TOLERANCE:.0%} | real rank | sim rank |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in check["ranking_real"]:
        v = check["strategies"][s]
        err = "-" if v["rel_error"] is None else f"{v['rel_error']:+.1%}"
        lines.append(
            f"| {s} | {f(v['real_speedup'], '.2f')} | {f(v['sim_speedup'], '.2f')} | {err} | "
            f"{v['verdict']} | {v['rank_real']} | {v['rank_sim']} |"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------- initial pass rates


def parse_bin_label(label: str) -> tuple[float, float, bool, bool]:
    """'0' -> (0, 0, closed, closed); '(.75,1)' -> (0.75, 1, open, open); '(0,.25]' etc."""
    s = label.strip()
    if s[:1] in "([" and s[-1:] in ")]" and "," in s:
        lo, hi = (float(t) for t in s[1:-1].split(","))
        closed = (s[0] == "[", s[-1] == "]")
    else:
        lo = hi = float(s)
        closed = (True, True)
    if not 0.0 <= lo <= hi <= 1.0:
        raise ValueError(f"pass-rate bin {label!r}: need 0 <= low <= high <= 1")
    return lo, hi, *closed


def binned_histogram(measured: dict[str, int]) -> list[list[float]]:
    """The warm start's counts {label: count} as preset bins [lo, hi, share], in label order.

    A ranged label becomes [lo, hi] (drawn uniformly: open or closed edges make no difference);
    '0' and '1' become the point bins [0, 0] and [1, 1] ("never / always solved when measured")."""
    total = sum(int(c) for c in measured.values())
    if total <= 0:
        raise ValueError("pass-rate histogram: the counts sum to 0")
    return [
        [lo, hi, int(c) / total]
        for (lo, hi, *_), c in zip(map(parse_bin_label, measured), measured.values())
    ]


def _bin_draws(lo: float, hi: float, cfg: SimConfig, quad: int) -> np.ndarray:
    """`quad` quadrature points of p for one preset bin, as SimPolicy draws it (policy.draw_pass_rates)."""
    u = (np.arange(quad) + 0.5) / quad
    tail = np.exp(np.log(cfg.p_floor) + (np.log(cfg.zero_bin_max) - np.log(cfg.p_floor)) * u)
    if lo == hi == 0.0:
        p = tail
    elif lo == hi == 1.0:
        p = 1.0 - tail
    else:
        p = lo + (hi - lo) * u
    return np.clip(p, cfg.p_floor, 1.0 - cfg.p_floor)


def measurement_matrix(
    bins: list[tuple[float, float]], labels: list[str], samples: int, cfg: SimConfig, quad: int = 64
) -> np.ndarray:
    """(L, B): probability that a prompt of preset bin b, measured with `samples` samples, lands in
    warm-start label l."""
    k = np.arange(samples + 1)  # (S+1,) successes
    rate = k / samples
    member = np.zeros((len(labels), samples + 1))  # (L, S+1) which label each rate falls in
    for i, (lo, hi, lo_closed, hi_closed) in enumerate(map(parse_bin_label, labels)):
        above = (rate > lo) | (lo_closed & (rate == lo))
        below = (rate < hi) | (hi_closed & (rate == hi))
        member[i] = above & below
    comb = np.array([math.comb(samples, int(j)) for j in k], dtype=np.float64)
    cols = []
    for lo, hi in bins:
        p = _bin_draws(lo, hi, cfg, quad)[:, None]  # (Q, 1)
        pmf = comb * p**k * (1.0 - p) ** (samples - k)  # (Q, S+1)
        cols.append(member @ pmf.mean(axis=0))  # (L,)
    return np.stack(cols, axis=1)


def deconvolved_histogram(
    measured: dict[str, int], samples: int, cfg: SimConfig | None = None, iters: int = 5000
) -> list[list[float]]:
    """True-p bins of width 1/samples (plus [0, 0] and [1, 1]) whose measurement with `samples`
    samples reproduces the counts `measured`: EM on the multinomial likelihood from the binned
    histogram spread over the fine bins. Bins of zero weight are dropped; weights sum to 1."""
    cfg = cfg or SimConfig()
    labels = list(measured)
    m = np.array([float(measured[x]) for x in labels])
    m = m / m.sum()
    fine = [(0.0, 0.0)] + [(j / samples, (j + 1) / samples) for j in range(samples)] + [(1.0, 1.0)]
    A = measurement_matrix(fine, labels, samples, cfg)  # (L, B)
    w = np.zeros(len(fine))
    for lo, hi, share in binned_histogram(measured):
        for j, (a, b) in enumerate(fine):
            if lo == hi:
                w[j] += share * (a == lo and b == hi)
            elif a < b:
                w[j] += share * max(0.0, min(hi, b) - max(lo, a)) / (hi - lo)
    norm = np.maximum(A.sum(axis=0), 1e-300)  # (B,) 1 where the labels cover every outcome
    for _ in range(iters):
        pred = A @ w  # (L,)
        ratio = np.divide(m, pred, out=np.zeros_like(m), where=pred > 0)
        w = w * (A.T @ ratio) / norm
    w = np.round(w / w.sum(), 6)
    top = np.argmax(w)  # takes the rounding residue, so that the weights sum to 1
    w[top] = round(1.0 - (w.sum() - w[top]), 6)
    return [[a, b, float(x)] for (a, b), x in zip(fine, w) if x > 0]


def remeasured(hist: list[list[float]], labels: list[str], samples: int, prompts: int) -> list:
    """Expected counts per label if `prompts` prompts of the preset pool were measured again."""
    A = measurement_matrix([(lo, hi) for lo, hi, _ in hist], labels, samples, SimConfig())
    w = np.array([x for *_, x in hist])
    return [round(float(c), 1) for c in prompts * A @ (w / w.sum())]


# --------------------------------------------------------------------- learning speed


def mean_curve(xs: list[np.ndarray], ys: list[np.ndarray], grid: np.ndarray) -> np.ndarray:
    """Seed mean of the runs' y(x) interpolated on `grid` (NaN where a seed has no value)."""
    return np.mean([curves.interp_curve(x, y, grid) for x, y in zip(xs, ys)], axis=0)


def real_grpo_curves(grpo: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """The real GRPO targets: grid (K,), held-out gain (K,), train-reward interval means (K-1,)."""
    xs = [np.array([e["cum_rollouts"] for e in r["evals"]], dtype=float) for r in grpo.values()]
    ys = [np.array([e["accuracy"] for e in r["evals"]], dtype=float) for r in grpo.values()]
    grid = curves.common_grid(xs)
    acc = mean_curve(xs, ys, grid)
    keep = np.isfinite(acc)
    grid, acc = grid[keep], acc[keep]
    spread = seed_spread(xs, ys, grid)
    levels = {}  # held-out accuracy per task level (evals.jsonl accuracy_<level>), seed mean
    for key in sorted(next(iter(grpo.values()))["evals"][0]):
        name = key.removeprefix("accuracy_")
        if key.startswith("accuracy_") and LEVEL_KEY.fullmatch(name):
            ly = [np.array([e[key] for e in r["evals"]], dtype=float) for r in grpo.values()]
            levels[name] = mean_curve(xs, ly, grid)
    reward = None
    if all(r["steps"] and "reward_mean" in r["steps"][0].get("learner", {}) for r in grpo.values()):
        per_seed = []
        for r in grpo.values():
            x = np.array([s["cum_rollouts"] for s in r["steps"]], dtype=float)
            rew = np.array([s["learner"]["reward_mean"] for s in r["steps"]], dtype=float)
            per_seed.append(
                [
                    rew[(x > a) & (x <= b)].mean() if np.any((x > a) & (x <= b)) else np.nan
                    for a, b in zip(grid[:-1], grid[1:])
                ]
            )
        reward = np.mean(per_seed, axis=0)
    return {
        "grid": grid,
        "accuracy": acc,
        "train_reward": reward,
        "spread": spread,
        "levels": levels,
        "train_levels": real_train_levels(grpo, grid),
    }


def pool_levels_of(run: dict[str, Any], column: str = "level") -> np.ndarray:
    """The task level (or another task column) of every pool prompt of a real run (its config's
    task, cut to pool_levels)."""
    from rollalloc.tasks import run_pool

    return np.asarray(run_pool(run["config"], run.get("pool_part")).train[column])


def trained_groups_of(step: dict[str, Any]) -> list[tuple[int, float, bool]]:
    """(prompt id, success rate, varies) of each group a step trained (its `trained` record;
    records from before `success_rate` / `varies` existed: the mean reward, 0 < mean < 1)."""
    t = step["trained"]
    rate = t.get("success_rate", t["mean_reward"])
    varies = t.get("varies") or [0.0 < m < 1.0 for m in t["mean_reward"]]
    return list(zip(t["prompt_ids"], rate, varies, strict=True))


def real_train_levels(grpo: dict[int, dict[str, Any]], grid: np.ndarray) -> dict | None:
    """{level: (mean success rate, share of groups with reward variance)} of GRPO's trained
    groups per grid interval (K-1,), seed mean, from the runs' `trained` records (`log_groups`);
    None when no step has one. GRPO walks the pool uniformly, so these are the pool level's mean
    pass rate and P(a group varies) over the interval."""
    have = [sum("trained" in st for st in r["steps"]) for r in grpo.values()]
    if not any(have):
        return None
    if not all(h == len(r["steps"]) for h, r in zip(have, grpo.values(), strict=True)):
        raise SystemExit(
            "real_train_levels: some steps of these GRPO runs have no `trained` "
            "record (log_groups was off for part of a run)"
        )
    per_seed: dict[str, list[tuple[list[float], list[float]]]] = {}
    for r in grpo.values():
        lev = pool_levels_of(r["run"])
        rows = []  # (cum rollouts at the step's end, level, success rate, varies)
        for st in r["steps"]:
            rows += [(st["cum_rollouts"], lev[p], m, v) for p, m, v in trained_groups_of(st)]
        x = np.array([c for c, _, _, _ in rows], dtype=float)
        names = np.array([n for _, n, _, _ in rows])
        m = np.array([v for _, _, v, _ in rows], dtype=float)
        var = np.array([v for _, _, _, v in rows], dtype=bool)
        for name in sorted(set(names.tolist())):
            rew, vary = [], []
            for a, b in zip(grid[:-1], grid[1:]):
                k = (x > a) & (x <= b) & (names == name)
                rew.append(m[k].mean() if k.any() else np.nan)
                vary.append(var[k].mean() if k.any() else np.nan)
            per_seed.setdefault(name, []).append((rew, vary))
    return {
        name: (np.nanmean([a for a, _ in v], axis=0), np.nanmean([b for _, b in v], axis=0))
        for name, v in per_seed.items()
    }


def seed_spread(xs: list[np.ndarray], ys: list[np.ndarray], grid: np.ndarray) -> np.ndarray:
    """Seed-to-seed standard deviation (ddof 1) of the accuracy at each grid point: (K,)."""
    if len(xs) < 2:
        return np.full(len(grid), np.nan)
    return np.std([curves.interp_curve(x, y, grid) for x, y in zip(xs, ys)], axis=0, ddof=1)


class GrpoSim:
    """The simulated GRPO curves for a parameter point, cached: gain scales (k_g, k_m), the
    plasticity of the levels in `plastic` (a preset with levels) and noise_scale."""

    def __init__(
        self,
        preset: dict[str, Any],
        shape: dict[str, int],
        seeds: list[int],
        options,
        plastic: list[str] | None = None,
    ):
        self.preset, self.shape, self.seeds, self.options = preset, shape, seeds, options
        self.plastic = plastic or []
        self.cache: dict[tuple, dict[str, np.ndarray]] = {}

    def gains(self, k_g: float, k_m: float) -> dict[str, float]:
        return {
            "global_gain": DEFAULTS.global_gain * k_g,
            "cluster_gain": DEFAULTS.cluster_gain * k_g,
            "memorize_gain": DEFAULTS.memorize_gain * k_m,
        }

    def preset_dict(
        self, k_g: float, k_m: float, rho: float | None = None, noise: float | None = None
    ) -> dict[str, Any]:
        """The preset (JSON form) at this parameter point (rho / noise None: as the preset)."""
        sim = {**self.preset["sim"], **self.gains(k_g, k_m)}
        if noise is not None:
            sim["noise_scale"] = noise
        d = {**self.preset, "sim": sim}
        if rho is not None and self.preset.get("levels"):
            d["levels"] = [
                {**lv, "plasticity": rho} if lv["name"] in self.plastic else lv
                for lv in self.preset["levels"]
            ]
        return d

    def curves(
        self,
        k_g: float,
        k_m: float,
        grid: np.ndarray,
        rho: float | None = None,
        noise: float | None = None,
    ) -> dict[str, Any]:
        from rollalloc.sim.run import simulate_run

        key = tuple(None if v is None else round(v, 9) for v in (k_g, k_m, rho, noise))
        if key not in self.cache:
            preset = preset_from_dict(self.preset_dict(k_g, k_m, rho, noise), PRESET_NAME)
            xs, acc, train, lev = [], [], [], {}
            tlev = {"train_accuracy_": {}, "train_varying_": {}}  # side -> {level: curves}
            for seed in self.seeds:
                r = simulate_run(
                    "grpo",
                    preset,
                    seed,
                    budget_rollouts=self.shape["budget_rollouts"],
                    eval_every_rollouts=self.shape["eval_every_rollouts"],
                    options=self.options,
                )
                xs.append(np.array([e["cum_rollouts"] for e in r["evals"]], dtype=float))
                acc.append(np.array([e["accuracy"] for e in r["evals"]]))
                train.append(np.array([e["train_accuracy"] for e in r["evals"]]))
                for k in r["evals"][0]:
                    if k.startswith("accuracy_") and LEVEL_KEY.fullmatch(k[9:]):
                        lev.setdefault(k[9:], []).append(np.array([e[k] for e in r["evals"]]))
                    for side, by in tlev.items():
                        if k.startswith(side) and LEVEL_KEY.fullmatch(k[len(side) :]):
                            by.setdefault(k[len(side) :], []).append(
                                np.array([e[k] for e in r["evals"]])
                            )
            pool = mean_curve(xs, train, grid)  # pool's mean p at the grid points

            def interval_mean(ys):
                c = mean_curve(xs, ys, grid)
                return 0.5 * (c[:-1] + c[1:])

            self.cache[key] = {
                "accuracy": mean_curve(xs, acc, grid),
                "train_reward": 0.5 * (pool[:-1] + pool[1:]),  # mean over each interval
                "spread": seed_spread(xs, acc, grid),
                "levels": {k: mean_curve(xs, v, grid) for k, v in lev.items()},
                "train_levels": {
                    name: (interval_mean(ys), interval_mean(tlev["train_varying_"][name]))
                    for name, ys in tlev["train_accuracy_"].items()
                },
            }
        return self.cache[key]


def heldout_loss(real: dict[str, Any], sim: dict[str, Any]) -> float:
    """Sum of squares between held-out accuracy gains over the initial accuracy; where both sides
    have per-level accuracies (a preset with levels), plus each level's sum of squares divided by
    the number of levels (the overall curve is their mean: it keeps the weight it has without)."""
    d = (sim["accuracy"] - sim["accuracy"][0]) - (real["accuracy"] - real["accuracy"][0])
    loss = float(np.nansum(d**2))
    common = sorted(set(real.get("levels") or {}) & set(sim.get("levels") or {}))
    for name in common:
        r, m = real["levels"][name], sim["levels"][name]
        loss += float(np.nansum(((m - m[0]) - (r - r[0])) ** 2)) / len(common)
    return loss


def spread_loss(real: dict[str, Any], sim: dict[str, Any]) -> float:
    """Sum of squares between the seed-to-seed standard deviations of held-out accuracy."""
    return float(np.nansum((sim["spread"] - real["spread"]) ** 2))


def train_loss(real: dict[str, Any], sim: dict[str, np.ndarray]) -> float:
    """Sum of squares between train-reward gains over the first evaluation interval."""
    r, s = real["train_reward"], sim["train_reward"]
    d = (s - s[0]) - (r - r[0])
    return float(np.nansum(d[np.isfinite(r)] ** 2))


def train_levels_loss(real: dict[str, Any], sim: dict[str, Any]) -> float:
    """Sum of squares between GRPO's per-level train-side curves (mean reward and share of
    groups with reward variance per interval; real from `log_groups`), over the levels both
    sides have, divided by their number (as heldout_loss's levels); 0 without real records."""
    common = sorted(set(real.get("train_levels") or {}) & set(sim.get("train_levels") or {}))
    loss = 0.0
    for name in common:
        for r, m in zip(real["train_levels"][name], sim["train_levels"][name], strict=True):
            if not np.all(np.isfinite(m)):  # a broken simulation, not a perfect fit
                return float("inf")
            loss += float(np.nansum((m - r) ** 2)) / len(common)
    return loss


def search_scale(loss, start: float, coarse: bool, zero: bool = False):
    """Minimise loss(k) on a log2 grid: coarse=True: 2^0.5 steps over [2^-6, 2^4] (and k = 0 if
    `zero`), then 2^(1/8) steps around the best; coarse=False: 2^(1/16) steps within 2^(+-1/4) of
    `start`. Returns (k, loss(k))."""
    if coarse:
        ks = [2.0**e for e in np.arange(-6.0, 4.0 + 1e-9, 0.5)]
        best = min(([0.0] if zero else []) + ks, key=loss)
        if best in (ks[0], ks[-1]):
            print(f"  warning: best scale {best:.4g} is at the edge of the coarse grid")
        start, step = best, 8
    else:
        step = 16
    if start == 0.0:  # nothing to refine around 0
        return 0.0, loss(0.0)
    best = min((start * 2.0 ** (j / step) for j in range(-4, 5)), key=loss)
    return best, loss(best)


def read_grpo_runs(dirs: list[str]) -> tuple[dict[str, Any], dict[int, dict[str, Any]]]:
    """The real GRPO runs of one or more comparisons, finished runs only (run.json and as many
    steps as the budget holds), one per seed (the first directory's where seeds repeat: a run of
    the same config and seed is the same run). Returns (runs of the first directory, grpo)."""
    first = read_comparison(dirs[0])
    grpo: dict[int, dict[str, Any]] = {}
    for d in dirs:
        for seed, r in sorted(read_comparison(d)["grpo"].items()):
            shape = testbed_shape(r["run"])
            want = shape["budget_rollouts"] // (shape["train_prompts"] * shape["group_size"])
            if len(r["steps"]) >= want and seed not in grpo:
                grpo[seed] = r
    if not grpo:
        raise SystemExit(f"{dirs}: no finished GRPO run")
    return first, grpo


def fit_levels(args: argparse.Namespace) -> int:
    """`fit --base-preset P`: fit a preset with levels (benchmarks/design_testbed.py --levels) to
    the real GRPO runs only. Its pool, levels and histograms stay; fitted are, in this order:
    the plasticity rho of the levels the warm start was trained on (--plastic-levels; default:
    the levels with sft_weights > 0 and plasticity > 0), with k_g refitted at each rho on the
    overall and per-level held-out gain curves; k_m on the train reward; k_g refined; then, with
    --fit-noise, noise_scale on the seed-to-seed spread of held-out accuracy (and k_g refined again,
    since under optimizer="rms" noise slows the mean). --set switches an effect on for the whole
    fit (sim.optimizer=rms, sim.loss_norm=token_mean, ...)."""
    t0 = time.perf_counter()
    runs, grpo = read_grpo_runs([args.real, *(args.also or [])])
    if args.grpo_seeds is not None:  # a fixed set (a benchmark still running adds seeds)
        grpo = {s: r for s, r in grpo.items() if s in args.grpo_seeds}
    base = next(iter(grpo.values()))["run"]
    shape = testbed_shape(base)
    preset = json.loads(Path(args.base_preset).read_text())
    overrides = parse_set(args.set)
    preset["name"] = Path(args.out).stem
    preset["sim"] = {
        **preset.get("sim", {}),
        "eval_prompts": shape["eval_prompts"],
        "ref_group_size": shape["group_size"],
        **overrides,
    }
    plastic = args.plastic_levels
    if plastic is None:
        tc = {**base["warm_start"]["payload"]["task_config"], **base["config"]["task_config"]}
        sft = tc.get("sft_weights") or tc.get("weights")
        names = [f"{t}x{d}d" for t, d in zip(tc["terms"], tc.get("digits") or [1] * 99)]
        plastic = [
            n
            for n, w in zip(names, sft)
            if w > 0
            and any(lv["name"] == n and lv.get("plasticity", 1) > 0 for lv in preset["levels"])
        ]
    seeds = sorted(grpo)
    print(f"pool: {shape}; real GRPO seeds {seeds}; fitted plasticity of {plastic}")
    if overrides:
        print(f"effects set for the fit: {overrides}")
    sim = GrpoSim(preset, shape, seeds, real_strategy_options(runs, "grpo", base), plastic)
    real = real_grpo_curves(grpo)
    grid = real["grid"]
    coarse = [2.0**e for e in np.arange(-2.0, 8.0 + 1e-9, 1.0)]

    def best_k_g(k_m, rho, noise, around=None):
        loss = lambda k: heldout_loss(real, sim.curves(k, k_m, grid, rho, noise))  # noqa: E731
        if around is None:
            start = min(coarse, key=loss)
            if start in (coarse[0], coarse[-1]):
                print(f"  warning: k_g {start:.4g} at the edge of the coarse grid")
        else:
            start = around
        k = min(
            (start * 2.0 ** (j / 8) for j in range(-4, 5, 2 if around is None else 1)), key=loss
        )
        return k, loss(k)

    fits = {}
    for rho in args.rho_grid if plastic else [None]:
        fits[rho] = best_k_g(0.0, rho, None)
        print(f"rho = {rho}: k_g = {fits[rho][0]:.4g}, held-out SSE {fits[rho][1]:.4g}")
    rho = min(fits, key=lambda r: fits[r][1])
    k_g = fits[rho][0]
    k_m = 0.0
    if real["train_reward"] is not None:
        lm = lambda k: train_loss(real, sim.curves(k_g, k, grid, rho, None))  # noqa: E731
        k_m = min([0.0] + [2.0**e for e in np.arange(-6.0, 5.0 + 1e-9, 1.0)], key=lm)
        if k_m > 0:
            k_m = min((k_m * 2.0 ** (j / 4) for j in range(-2, 3)), key=lm)
        print(f"k_m = {k_m:.4g} (train SSE {lm(k_m):.4g})")
        if k_m > 0:
            k_g, _ = best_k_g(k_m, rho, None, around=k_g)
    noise = None
    if args.fit_noise:
        ls = lambda v: spread_loss(real, sim.curves(k_g, k_m, grid, rho, v))  # noqa: E731
        noise = min([0.0] + [4.0**e for e in range(0, 8)], key=ls)
        if noise > 0:
            noise = min((noise * 2.0 ** (j / 2) for j in range(-2, 3)), key=ls)
        print(f"noise_scale = {noise:.4g} (spread SSE {ls(noise):.4g})")
        if noise > 0:
            k_g, _ = best_k_g(k_m, rho, noise, around=k_g)
    best = sim.curves(k_g, k_m, grid, rho, noise)
    loss_g, loss_s = heldout_loss(real, best), spread_loss(real, best)
    n = len(grid)
    print(
        f"{'rollouts':>10} {'real gain':>10} {'sim gain':>10} {'real sd':>8} {'sim sd':>8}  per level real/sim"
    )
    for i, x in enumerate(grid):
        lv = "  ".join(
            f"{k} {real['levels'][k][i] - real['levels'][k][0]:+.3f}/"
            f"{best['levels'][k][i] - best['levels'][k][0]:+.3f}"
            for k in sorted(set(real["levels"]) & set(best["levels"]))
        )
        print(
            f"{x:>10,.0f} {real['accuracy'][i] - real['accuracy'][0]:>10.4f} "
            f"{best['accuracy'][i] - best['accuracy'][0]:>10.4f} {real['spread'][i]:>8.4f} "
            f"{best['spread'][i]:>8.4f}  {lv}"
        )
    out_d = sim.preset_dict(k_g, k_m, rho, noise)
    out_d["sim"] = {
        k: float(f"{v:.4g}") if isinstance(v, float) else v for k, v in out_d["sim"].items()
    }
    fitted = {
        "k_g": round(k_g, 4),
        "k_m": round(k_m, 4),
        "plasticity": None if rho is None else round(rho, 4),
        "plastic_levels": plastic,
        "noise_scale": noise,
        "heldout_sse": round(loss_g, 6),
        "heldout_rmse_overall": round(
            math.sqrt(
                float(
                    np.nansum(
                        (
                            (best["accuracy"] - best["accuracy"][0])
                            - (real["accuracy"] - real["accuracy"][0])
                        )
                        ** 2
                    )
                )
                / n
            ),
            5,
        ),
        "spread_rmse": round(math.sqrt(loss_s / n), 5),
        "real_final_spread": round(float(real["spread"][-1]), 5),
        "sim_final_spread": round(float(best["spread"][-1]), 5),
    }
    out_d["description"] = preset.get("description", "").split(" Learning speed")[0] + (
        " Learning speed, plasticity of the warm-started levels, memorisation and noise fitted "
        "to the real GRPO runs only."
    )
    out_d["source"] = (
        f"benchmarks/fit_testbed_preset.py fit {args.real} "
        + "".join(f"--also {a} " for a in args.also or [])
        + f"--base-preset {args.base_preset}"
        + (f" --grpo-seeds {','.join(map(str, seeds))}" if args.grpo_seeds is not None else "")
        + f" --rho-grid {','.join(f'{r:g}' for r in args.rho_grid)}"
        + (" --fit-noise" if args.fit_noise else "")
        + "".join(f" --set sim.{k}={json.dumps(v)}" for k, v in overrides.items())
        + f": {len(grpo)} real GRPO runs (seeds {seeds}, {shape['budget_rollouts']:,} rollouts, "
        f"{shape['train_prompts']} x {shape['group_size']}); fitted {json.dumps(fitted)}; gains "
        "= SimConfig defaults x k_g (global, cluster) and x k_m (memorize)."
    )
    order = ["name", "description", "source", "num_prompts", "levels", "sim"]
    text = json.dumps({k: out_d[k] for k in order if k in out_d}, indent=1)
    text = re.sub(r"\[\s+([^\[\]]+?)\s+\]", lambda m: "[" + re.sub(r",\s+", ", ", m[1]) + "]", text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text + "\n")
    print(f"fitted: {fitted}")
    print(
        f"wrote {args.out} ({len(sim.cache)} simulated GRPO points, {time.perf_counter() - t0:.0f} s)"
    )
    return 0


def fit(args: argparse.Namespace) -> int:
    if args.base_preset:
        return fit_levels(args)
    t0 = time.perf_counter()
    runs = read_comparison(args.real)
    grpo = runs["grpo"]
    base = next(iter(grpo.values()))["run"]
    shape = testbed_shape(base)
    ws = base.get("warm_start", {}).get("pass_rates")
    if not ws or "histogram" not in ws:
        raise SystemExit(f"{args.real}: run.json has no warm_start.pass_rates.histogram")
    measured, samples = ws["histogram"], int(ws["samples"])
    if args.histogram == "binned":
        hist = binned_histogram(measured)
    else:
        hist = deconvolved_histogram(measured, samples)
    print(f"pool: {shape}")
    print(f"warm-start histogram ({ws['prompts']} prompts x {samples} samples): {measured}")
    for name, h in (("binned", binned_histogram(measured)), (args.histogram, hist)):
        again = remeasured(h, list(measured), samples, int(ws["prompts"]))
        print(f"  {name:>11} preset, measured again: {again}")
    gap = max(abs(a - int(c)) for a, c in zip(again, measured.values()))
    if args.histogram == "deconvolved" and gap > 0.5:
        print(f"  warning: the deconvolved pool misses the measurement by up to {gap} prompts")
    print(f"preset histogram ({args.histogram}): {[[round(x, 4) for x in b] for b in hist]}")

    overrides = parse_set(args.set)
    preset = {
        "name": Path(args.out).stem,
        "num_prompts": shape["num_prompts"],
        "pass_rate_histogram": hist,
        "sim": {
            "eval_prompts": shape["eval_prompts"],
            "ref_group_size": shape["group_size"],
            **overrides,  # a documented effect switched on: k_g, k_m are fitted with it
        },
    }
    if overrides:
        print(f"effects set for the fit: {overrides}")
    seeds = sorted(grpo)
    sim = GrpoSim(preset, shape, seeds, real_strategy_options(runs, "grpo", base))
    real = real_grpo_curves(grpo)
    grid = real["grid"]

    def lg(k_m):
        return lambda k: heldout_loss(real, sim.curves(k, k_m, grid))

    def lm(k_g):
        return lambda k: train_loss(real, sim.curves(k_g, k, grid))

    k_m = 1.0
    k_g, loss_g = search_scale(lg(k_m), 1.0, coarse=True)
    print(f"k_g = {k_g:.4g} (held-out SSE {loss_g:.3g}) at k_m = {k_m:.4g}")
    fit_memo = real["train_reward"] is not None
    if fit_memo:
        k_m, loss_m = search_scale(lm(k_g), 1.0, coarse=True, zero=True)
        print(f"k_m = {k_m:.4g} (train SSE {loss_m:.3g}) at k_g = {k_g:.4g}")
        k_g, loss_g = search_scale(lg(k_m), k_g, coarse=False)
        k_m, loss_m = search_scale(lm(k_g), k_m, coarse=False)
        print(
            f"refined: k_g = {k_g:.4g} (held-out SSE {loss_g:.3g}), k_m = {k_m:.4g} "
            f"(train SSE {loss_m:.3g})"
        )
    else:
        print("real steps have no learner.reward_mean: memorize_gain keeps its default (k_m = 1)")
    best = sim.curves(k_g, k_m, grid)
    n = int(np.isfinite(real["accuracy"]).sum())
    rmse = math.sqrt(loss_g / n)
    print(f"{'rollouts':>10} {'real gain':>10} {'sim gain':>10}   (held-out accuracy - initial)")
    for x, r, s in zip(grid, real["accuracy"], best["accuracy"]):
        print(f"{x:>10,.0f} {r - real['accuracy'][0]:>10.4f} {s - best['accuracy'][0]:>10.4f}")
    if fit_memo:
        print(f"{'interval':>10} {'real':>10} {'sim':>10}   (train reward - first interval)")
        rr, sr = real["train_reward"], best["train_reward"]
        for x, r, s in zip(grid[1:], rr, sr):
            print(f"{x:>10,.0f} {r - rr[0]:>10.4f} {s - sr[0]:>10.4f}")

    gains = {k: float(f"{v:.4g}") for k, v in sim.gains(k_g, k_m).items()}
    preset["sim"].update(gains)
    preset["description"] = (
        "The real CPU testbed of `rollalloc compare --task arith` (tiny Qwen2 after the warm "
        f"start, {shape['num_prompts']} train / {shape['eval_prompts']} held-out prompts, groups "
        f"of {shape['group_size']}): initial pass rates from the warm start's measurement, "
        "learning speed fitted to real GRPO only."
    )
    preset["source"] = (
        f"benchmarks/fit_testbed_preset.py fit {args.real} --histogram {args.histogram}"
        + "".join(f" --set sim.{k}={json.dumps(v)}" for k, v in overrides.items())
        + ": "
        f"histogram from run.json warm_start.pass_rates ({ws['prompts']} prompts x {samples} "
        f"samples, warm start {base.get('warm_start', {}).get('key', '?')}: {measured}); gains = "
        f"SimConfig defaults x k_g = {k_g:.4g} (global, cluster; held-out gain rmse {rmse:.4f} "
        f"over {n} points) and x k_m = {k_m:.4g} (memorize; train-reward gain) fitted to the "
        f"{len(grpo)} real GRPO runs (seeds {seeds}, {shape['budget_rollouts']:,} rollouts, "
        f"{shape['train_prompts']} x {shape['group_size']})."
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    order = ["name", "description", "source", "num_prompts", "pass_rate_histogram", "sim"]
    text = json.dumps({k: preset[k] for k in order}, indent=2)
    text = re.sub(r"\[\s+([^\[\]]+?)\s+\]", lambda m: "[" + re.sub(r",\s+", ", ", m[1]) + "]", text)
    out.write_text(text + "\n")  # one line per histogram bin
    print(f"gains: {gains}")
    print(f"wrote {out} ({len(sim.cache)} simulated GRPO curves, {time.perf_counter() - t0:.1f} s)")
    return 0


# --------------------------------------------------------------------- simulated vs real


def side_by_side(real: dict[str, Any], sim: dict[str, Any], strategies: list[str]) -> str:
    """Markdown table: rollouts to target, speedup vs the baseline and final accuracy, real | sim."""
    base = real["target"]["baseline"]

    def rtt(summary, s):
        row = summary["strategies"].get(s)
        if row is None:
            return "n/a"
        v = row["rollouts_to_target"]
        return "never" if v is None else f"{v:,.0f}"

    def speedup(summary, s):
        row = summary["strategies"].get(s)
        if s == base or row is None:
            return "-" if s == base else "n/a"
        v = summary["speedup"].get(s, {}).get(base)
        if v is not None:
            return f"{v:.2f}"
        b = summary["strategies"][base]["rollouts_to_target"]  # s never reached the target
        return f"<{b / summary['budget_rollouts']:.2f}" if b else "n/a"

    def final(summary, s, key="final_accuracy", spec=".4f", minus=0.0):
        row = summary["strategies"].get(s)
        v = None if row is None else row.get(key)
        return "n/a" if v is None else format(v - minus, spec)

    head = [
        "strategy",
        "real rollouts-to-target",
        "sim rollouts-to-target",
        f"real speedup vs {base}",
        f"sim speedup vs {base}",
        "real final acc",
        "sim final acc",
        "real gain",
        "sim gain",
        "real eff. prompt ratio",
        "sim eff. prompt ratio",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in strategies:
        cells = [s, rtt(real, s), rtt(sim, s), speedup(real, s), speedup(sim, s)]
        cells += [final(real, s), final(sim, s)]
        cells += [final(x, s, "final_accuracy", "+.4f", x["initial_accuracy"]) for x in (real, sim)]
        cells += [final(x, s, "mean_effective_prompt_ratio", ".3f") for x in (real, sim)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def compare(args: argparse.Namespace) -> int:
    import rollalloc.sim  # noqa: F401  (registers "oracle")
    from rollalloc.report import write_report
    from rollalloc.sim.policy import load_preset
    from rollalloc.sim.run import simulate

    t0 = time.perf_counter()
    runs = read_comparison(args.real)
    if not (Path(args.real) / "summary.json").is_file():
        raise SystemExit(f"{args.real}: no summary.json (run `rollalloc report {args.real}`)")
    real = json.loads((Path(args.real) / "summary.json").read_text())
    base = next(iter(runs["grpo"].values()))["run"]
    shape = testbed_shape(base)
    strategies = args.strategies or [s for s in real["strategies"] if s in runs] or STRATEGIES
    baseline, fraction = real["target"]["baseline"], real["target"]["fraction"]
    if baseline not in strategies:
        raise SystemExit(f"--strategies must include the real baseline {baseline!r}")
    seeds = args.seeds if args.seeds is not None else real["seeds"]
    preset = load_preset(args.preset)
    overrides = parse_set(args.set)
    sim_cfg = preset.sim.replace(ref_group_size=shape["group_size"], **overrides)
    options = {s: real_strategy_options(runs, s, base) for s in strategies}
    for s, opts in options.items():  # simulate() passes train_prompts itself
        if opts.pop("train_prompts", shape["train_prompts"]) != shape["train_prompts"]:
            raise SystemExit(f"{s}: the real runs' train_prompts differ from grpo's")
    print(f"simulating {strategies} x seeds {seeds} on {preset.name} {shape}")
    sim_runs, configs = simulate(
        strategies,
        preset,
        seeds,
        budget_rollouts=shape["budget_rollouts"],
        eval_every_rollouts=shape["eval_every_rollouts"],
        train_prompts=shape["train_prompts"],
        group_size=shape["group_size"],
        options=options,
        sim_config=sim_cfg,
    )
    sim_s = time.perf_counter() - t0
    summary = write_report(
        args.out,
        kind="simulate",
        task=preset.name,
        seeds=seeds,
        budget_rollouts=shape["budget_rollouts"],
        runs=sim_runs,
        strategy_configs={s: configs[s] for s in strategies},
        baseline=baseline,
        fraction=fraction,
        extra={
            "preset": preset.to_dict() | {"sim": configs.get("simulator")},
            "real_comparison": str(args.real),
            "testbed": shape,
            "stopped_runs": {
                f"{s}/{seed}": r["stopped"]
                for s, by in sim_runs.items()
                for seed, r in by.items()
                if r.get("stopped")
            },
            "sim_overrides": overrides,
            "sim_seconds": round(sim_s, 2),
            "command": " ".join(sys.argv),
        },
    )
    table = side_by_side(real, summary, strategies)
    check = prediction_check(real, summary, strategies)
    defined = check["speedups_defined"]
    verdict = (
        f"Kendall tau (rankings above) = {check['kendall_tau']:.3f} "
        f"(floor {TAU_FLOOR}: {'holds' if check['tau_floor_holds'] else 'fails'}). Speedups within "
        f"{SPEEDUP_TOLERANCE:.0%}: {'hold' if check['speedup_floor_holds'] else 'fail'} "
        f"({defined} real speedup(s) defined, i.e. reached by both the strategy and {baseline}; "
        '"both never" counts as consistent, a target reached on one side only as a miss). '
        f"Supplementary, the order by final accuracy alone (equal budget): tau = "
        f"{check['kendall_tau_final_accuracy']:.3f}."
    )
    real_missing = [s for s in strategies if s not in real["strategies"]]
    text = "\n".join(
        [
            f"# Simulated ({preset.name}) vs real ({args.real})",
            "",
            f"Target: {fraction:g} of {baseline}'s gain, each side on its own curves. Real: "
            f"initial {real['initial_accuracy']:.4f}, target {real['target']['value']:.4f}. "
            f"Simulated: initial {summary['initial_accuracy']:.4f}, target "
            f"{summary['target']['value']:.4f}. {len(seeds)} seeds, "
            f"{shape['budget_rollouts']:,} rollouts, {shape['train_prompts']} x "
            f'{shape["group_size"]}. "never": not within the budget; "<x": its speedup '
            "is below x; gain: final - initial accuracy.",
            "",
            table,
            "",
            "Prediction check. Ranking: rollouts to target ascending, never after every reached "
            "one, ties (equal rollouts or both never) by final accuracy, higher first.",
            "",
            check_table(check, baseline),
            "",
            f"Real ranking: {' > '.join(check['ranking_real'])}  ",
            f"Sim ranking:  {' > '.join(check['ranking_sim'])}",
            "",
            verdict,
            *(
                ["", f"Not in the real summary (simulated only): {', '.join(real_missing)}."]
                if real_missing
                else []
            ),
            *(["", f"Simulator overrides: {overrides}."] if overrides else []),
            "",
            f"Simulated runs: {args.out}/summary.json ({sim_s:.1f} s of simulation).",
            "",
        ]
    )
    (Path(args.out) / "sim_vs_real.md").write_text(text)
    (Path(args.out) / "sim_vs_real.json").write_text(
        json.dumps(
            {
                "real": str(args.real),
                "preset": preset.name,
                "overrides": overrides,
                "strategies": strategies,
                "real_rows": {s: real["strategies"].get(s) for s in strategies},
                "initial_accuracy": {
                    "real": real["initial_accuracy"],
                    "sim": summary["initial_accuracy"],
                },
                "sim_rows": {
                    s: {
                        k: summary["strategies"][s].get(k)
                        for k in ("rollouts_to_target", "final_accuracy")
                    }
                    for s in strategies
                },
                **check,
            },
            indent=1,
            default=float,
        )
    )
    print(text)
    print(f"compare: {time.perf_counter() - t0:.1f} s in all")
    return 0


def speedup_check(real: dict[str, Any], sim: dict[str, Any], strategies: list[str]) -> dict:
    """Issue 15's floors on speedups vs the baseline: Kendall tau-b of the strategies' speedups
    (a strategy that never reaches the target scores 0; the baseline 1), and per strategy the
    ratio sim / real where both exist (within the floor if |ratio - 1| <= 25%; "never" on both
    sides agrees, on one side only is a miss)."""
    base = real["target"]["baseline"]
    common = [s for s in strategies if s in real["strategies"] and s in sim["strategies"]]

    def score(summary, s):
        return 1.0 if s == base else (speedup_of(summary, s, base) or 0.0)

    r = [score(real, s) for s in common]
    m = [score(sim, s) for s in common]
    rows = {}
    for s, a, b in zip(common, r, m):
        if s == base:
            verdict, ratio = "baseline", 1.0
        elif a and b:
            ratio = b / a
            verdict = "ok" if abs(ratio - 1.0) <= SPEEDUP_TOLERANCE else "miss"
        else:
            ratio = None
            verdict = "both never" if not a and not b else "miss (never on one side)"
        rows[s] = {"real": a, "sim": b, "ratio": ratio, "verdict": verdict}
    tau = kendall_tau(r, m)
    return {
        "strategies": rows,
        "kendall_tau_b": tau,
        "tau_floor_holds": bool(tau >= TAU_FLOOR),
        "speedup_floor_holds": all(
            v["verdict"] in ("ok", "baseline", "both never") for v in rows.values()
        ),
    }


def check(args: argparse.Namespace) -> int:
    real = json.loads(Path(args.real_summary).read_text())
    sim = json.loads((Path(args.sim) / "summary.json").read_text())
    for spec in args.add or []:  # DIR:STRATEGY=NAME, a variant simulated in another run
        where, _, rename = spec.rpartition(":")
        strategy, _, name = rename.partition("=")
        other = json.loads((Path(where) / "summary.json").read_text())
        if strategy not in other["strategies"] or not name:
            raise SystemExit(f"--add {spec}: expected DIR:STRATEGY=NAME with STRATEGY in DIR")
        if other.get("target") != sim.get("target"):
            raise SystemExit(
                f"--add {spec}: its target {other.get('target')} differs from {args.sim}'s "
                f"{sim.get('target')} (same seeds, budget and baseline runs needed)"
            )
        sim["strategies"][name] = other["strategies"][strategy]
    strategies = args.strategies or [s for s in real["strategies"] if s in sim["strategies"]]
    res = speedup_check(real, sim, strategies)
    f = lambda v: "never" if not v else f"{v:.2f}x"  # noqa: E731
    lines = [
        "| strategy | real speedup | sim speedup | sim / real | verdict |",
        "|---|---|---|---|---|",
    ]
    order = sorted(res["strategies"], key=lambda s: -res["strategies"][s]["real"])
    for s in order:
        v = res["strategies"][s]
        ratio = "-" if v["ratio"] is None else f"{v['ratio']:.2f}"
        lines.append(f"| {s} | {f(v['real'])} | {f(v['sim'])} | {ratio} | {v['verdict']} |")
    extra = [s for s in sim["strategies"] if s not in res["strategies"]]
    for s in extra:  # simulated only (the oracle)
        lines.append(
            f"| {s} | - | {f(speedup_of(sim, s, real['target']['baseline']))} | - | sim only |"
        )
    lines.append("")
    lines.append(
        f"Kendall tau-b of the {len(order)} speedups (never = 0): {res['kendall_tau_b']:.3f} "
        f"(floor {TAU_FLOOR}: {'holds' if res['tau_floor_holds'] else 'fails'}); every speedup "
        f"within {SPEEDUP_TOLERANCE:.0%}: {'holds' if res['speedup_floor_holds'] else 'fails'}."
    )
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
        Path(args.out).with_suffix(".json").write_text(json.dumps(res, indent=1))
    return 0


SET_HELP = "set a SimConfig field (repeatable), e.g. sim.loss_norm=token_mean"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fit", help="fit the preset to a real comparison's GRPO runs")
    f.add_argument("real", help="a `rollalloc compare --task arith` output directory")
    f.add_argument("--out", default=str(PRESET_PATH), help=f"preset file (default {PRESET_PATH})")
    f.add_argument(
        "--histogram",
        choices=["deconvolved", "binned"],
        default="deconvolved",
        help="initial pass rates: fitted to the measurement (default) or its bins copied",
    )
    f.add_argument("--set", action="append", metavar="sim.FIELD=VALUE", help=SET_HELP)
    f.add_argument(
        "--base-preset",
        help="a preset with levels (design_testbed.py --levels): fit it instead of building one "
        "from the warm start's histogram (plasticity, gains, memorisation, noise)",
    )
    f.add_argument(
        "--also",
        action="append",
        metavar="DIR",
        help="with --base-preset: more comparisons whose finished GRPO runs join the fit "
        "(a seed already read is skipped)",
    )
    f.add_argument(
        "--plastic-levels",
        type=lambda t: [x.strip() for x in t.split(",") if x.strip()],
        help="with --base-preset: levels whose plasticity is fitted (default: those the warm start "
        "was trained on, sft_weights > 0)",
    )
    f.add_argument(
        "--rho-grid",
        type=lambda t: [float(x) for x in t.split(",")],
        default=[0.0, 0.25, 1.0],
        help="with --base-preset: plasticities tried (default 0,0.25,1)",
    )
    f.add_argument(
        "--grpo-seeds",
        type=lambda t: [int(x) for x in t.split(",") if x.strip()],
        help="with --base-preset: only these seeds of the finished GRPO runs",
    )
    f.add_argument(
        "--fit-noise",
        action="store_true",
        help="with --base-preset: fit noise_scale to the seed-to-seed spread of GRPO's accuracy",
    )
    f.set_defaults(func=fit)
    c = sub.add_parser("compare", help="simulate the strategies on the preset, table vs real")
    c.add_argument("real", help="the real comparison directory (with summary.json)")
    c.add_argument("--out", required=True, help="output directory of the simulated report")
    c.add_argument("--preset", default=PRESET_NAME, help="preset name or JSON path")
    c.add_argument(
        "--strategies",
        type=lambda t: [s.strip() for s in t.split(",") if s.strip()],
        default=None,
        help="comma-separated (default: every strategy of the real summary.json)",
    )
    c.add_argument("--set", action="append", metavar="sim.FIELD=VALUE", help=SET_HELP)
    c.add_argument(
        "--seeds",
        type=lambda t: [int(s) for s in t.split(",") if s.strip()],
        help="comma-separated simulator seeds (default: the real comparison's)",
    )
    c.set_defaults(func=compare)
    k = sub.add_parser("check", help="speedups of a simulate output vs a real summary: tau, ratios")
    k.add_argument("sim", help="a `rollalloc simulate` output directory (summary.json)")
    k.add_argument("real_summary", help="the real comparison's summary.json")
    k.add_argument(
        "--strategies",
        type=lambda t: [s.strip() for s in t.split(",") if s.strip()],
        default=None,
        help="comma-separated (default: every strategy of both summaries)",
    )
    k.add_argument(
        "--add",
        action="append",
        metavar="DIR:STRATEGY=NAME",
        help="a strategy of another simulate output (same seeds and baseline runs) under the real "
        "summary's NAME, e.g. runs/sim-pmax:posterior-signal=psPmax (repeatable)",
    )
    k.add_argument(
        "--out", help="write the table (markdown) here and the numbers next to it (.json)"
    )
    k.set_defaults(func=check)
    args = ap.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
