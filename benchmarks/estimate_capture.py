"""How much of what knowing every pass rate is worth does an estimate of p capture? An offline
replay of a real GRPO run (docs/posterior-signal.md, "Strata: a prior per level").

    rollalloc train --config configs/testbed.yaml --budget-rollouts 98304 --set eval_metric=exact \\
        --set eval_k=0 --strategy grpo --seed 0 --threads 1 --set log_groups=true \\
        --set log_pass_rates_every=4 --out runs/trace/grpo0
    python benchmarks/estimate_capture.py runs/trace/grpo0 --window 80

The run records every trained group (`log_groups`) and, every few steps, the exact pass rate p_i of
every pool prompt under the policy that generated that step (`log_pass_rates_every`). At each such
step s the replay takes the next W prompts of GRPO's stream (the window a selection rule would
see) and asks which B of them to train (B = the run's train_prompts), scoring a choice by the mean
expected GRPO signal S(p_i, n) of the chosen under the exact p_i of step s:

    capture(rule) = (S(rule's B) - S(first B)) / (S(best B by exact p) - S(first B))

each S the mean over the snapshot steps (a ratio of means, not a mean of per-step ratios); 0 is
GRPO's choice (the first B), 1 as good as knowing every p. A window that crosses an epoch's end
holds a prompt at most once. A rule sees only what a strategy
could have seen by step s: the groups trained before it (k successes of n), the prompts' `level`
column (or the one --column names), and, for the reference rules `stale` and `fresh`, p itself
(stale, or through a fresh binomial look). Unseen prompts and the shrinkage target take their
level's mean success over the last 16 steps (the pool's where the task has no level column).
Rules:

    last       the prompt's last group, k+1 / n+2; unseen: the level mean
    level      the level mean only
    shrunk     all the prompt's groups pooled, shrunk to the level mean with the weight of 4 rollouts
    fresh8     a fresh look of 8 rollouts at today's p, shrunk the same way (what a probe buys)
    stale64    the exact p of the newest snapshot at least 64 steps before s (what a perfect but
               old estimate buys; steps without one are left out of its figure)
    seen       the exact p of every prompt trained before s; one never trained ranks at the
               window's mean S (oracle-greedy know=seen's rule; on GRPO's permuted stream a
               window mixes trained and untrained prompts only across an epoch's end, so there it
               is close to an indicator of the epoch)
    visit      the exact p at each prompt's last group (the snapshot at or before it), the window's
               mean S of these for one never trained: what likelihood-rank knows with short answers

--fresh K,K,... adds freshK rules (a fresh look of K rollouts; how capture grows with the quality of
an estimate); --bands B,B,... prints, per band of exact p, the window's share and the share of
the prompts the knows-p choice leaves out (where its gain is).

Each rule's capture is reported over all snapshot steps and per epoch (steps.jsonl's `epoch`),
with the number of snapshot steps behind each figure.
The run must be GRPO's (its stream is the data order a window is drawn from).
"""

from __future__ import annotations

import argparse
import json
import sys
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np

from rollalloc.strategies.posterior_signal import _GRID, signal_table

RECENT = 16  # steps of the level mean
SHRINK = 4.0  # rollouts the level mean weighs in `shrunk` and `fresh8`


class View:
    """What a rule may read at snapshot step s: per prompt, the groups trained before s."""

    def __init__(self, num_prompts: int, level: np.ndarray, n: int) -> None:
        self.level, self.n = level, n
        self.last_k = np.full(num_prompts, np.nan)  # (N,) successes of the last group
        self.last_n = np.zeros(num_prompts)  # (N,) its size
        self.sum_k = np.zeros(num_prompts)  # (N,) successes of all groups
        self.sum_n = np.zeros(num_prompts)  # (N,) rollouts of all groups
        self.last_step = np.full(num_prompts, -1)  # (N,) step of the last group
        self.recent: list[tuple[int, np.ndarray, np.ndarray]] = []  # (step, levels, success rates)

    def add(self, step: int, pids: np.ndarray, k: np.ndarray, sizes: np.ndarray) -> None:
        self.last_k[pids], self.last_n[pids] = k, sizes
        self.last_step[pids] = step
        np.add.at(self.sum_k, pids, k)
        np.add.at(self.sum_n, pids, sizes)
        self.recent.append((step, self.level[pids], k / sizes))

    def level_mean(self, s: int) -> np.ndarray:
        """(L,) mean success rate of each level's groups of the last RECENT steps before s (the
        pool's over all steps where a level has none; 0.5 before anything was seen)."""
        lv = [x for x in self.recent if x[0] >= s - RECENT]
        levels = np.concatenate([x[1] for x in lv]) if lv else np.zeros(0, dtype=int)
        rates = np.concatenate([x[2] for x in lv]) if lv else np.zeros(0)
        every = np.concatenate([x[2] for x in self.recent]) if self.recent else np.zeros(0)
        pool = float(every.mean()) if len(every) else 0.5
        out = np.full(int(self.level.max()) + 1, pool)
        for j in np.unique(levels):
            out[j] = rates[levels == j].mean()
        return out


# window, step, view, ctx -> an estimate of each window prompt's p (None: nothing to go on at this
# step); the B of highest S(estimate) are chosen (ties: stream order). ctx: "p" (N,) today's exact
# p, "P" (T, N) and "steps" (T,) the snapshots, "rng"
Rule = Callable[[np.ndarray, int, View, dict], np.ndarray]


def rule_last(win, s, v, ctx):
    mu = v.level_mean(s)[v.level[win]]
    seen = ~np.isnan(v.last_k[win])
    return np.where(seen, (np.nan_to_num(v.last_k[win]) + 1) / (v.last_n[win] + 2), mu)


def rule_level(win, s, v, ctx):
    return v.level_mean(s)[v.level[win]]


def rule_shrunk(win, s, v, ctx):
    mu = v.level_mean(s)[v.level[win]]
    return (v.sum_k[win] + SHRINK * mu) / (v.sum_n[win] + SHRINK)


def make_fresh(look: int) -> Rule:
    """freshK: a fresh look of K rollouts at today's p, shrunk to the level mean like `shrunk`."""

    def rule(win, s, v, ctx):
        k = ctx["rng"].binomial(look, ctx["p"][win])
        return (k + SHRINK * v.level_mean(s)[v.level[win]]) / (look + SHRINK)

    return rule


def rule_seen(win, s, v, ctx):
    """Scores, not estimates (see SCORES): the exact S of a prompt trained before s, the window's
    mean exact S for one never trained (oracle-greedy know=seen)."""
    S = ctx["sig"](ctx["p"][win])
    return np.where(v.sum_n[win] > 0, S, S.mean())


def rule_visit(win, s, v, ctx):
    """Scores: the exact S at the prompt's last group (the newest snapshot at or before that step:
    what likelihood-rank reads from a short answer's log-prob), the window's mean of these for one
    never trained (likelihood-rank's rule)."""
    t = v.last_step[win]
    seen = t >= 0
    j = np.searchsorted(ctx["steps"], t, side="right") - 1  # (W,) snapshot of each last visit
    S = ctx["sig"](ctx["P"][np.maximum(j, 0), win])
    ok = seen & (j >= 0)
    return np.where(ok, S, S[ok].mean() if ok.any() else 0.0)


def rule_stale64(win, s, v, ctx):
    j = int(np.searchsorted(ctx["steps"], s - 64, side="right")) - 1  # newest at or before s - 64
    return ctx["P"][j][win] if j >= 0 else None


RULES: dict[str, Rule] = {
    "last": rule_last,
    "level": rule_level,
    "shrunk": rule_shrunk,
    "fresh8": make_fresh(8),
    "stale64": rule_stale64,
    "seen": rule_seen,
    "visit": rule_visit,
}
SCORES = {"seen": lambda x: x, "visit": lambda x: x}  # rules whose output ranks as it is


def windows(trace: list[dict], steps: np.ndarray, window: int):
    """Each step t of the trace, in order, as (t, j, win): at a snapshot step (steps[j]) with a
    full window after it, win (<= W,) the next `window` prompts of GRPO's stream from that step,
    each prompt once, in stream order (a window that crosses an epoch's end holds a prompt once);
    elsewhere j and win are None."""
    B = len(trace[0]["prompt_ids"])
    stream = np.concatenate([np.asarray(t["prompt_ids"], dtype=np.int64) for t in trace])
    at = {int(s): j for j, s in enumerate(steps)}
    for t in trace:
        s = int(t["step"])
        if s in at and s * B + window <= len(stream):
            win = stream[s * B : s * B + window]
            yield t, at[s], win[np.sort(np.unique(win, return_index=True)[1])]
        else:
            yield t, None, None


def drop_bands(
    trace: list[dict], P: np.ndarray, steps: np.ndarray, *, window: int, bins: list[float]
) -> tuple[np.ndarray, np.ndarray]:
    """Where knowing p drops prompts: over the snapshot steps, the share of the window's prompts
    (W,) and of those the knows-p choice leaves out (the W - B of least S) in each band of exact p
    [bins[j], bins[j+1]). Returns (window share, dropped share), each (len(bins) - 1,)."""
    n, B = int(trace[0]["group_sizes"][0]), len(trace[0]["prompt_ids"])
    S = signal_table(n)[n]
    seen = np.zeros(len(bins) - 1)
    dropped = np.zeros(len(bins) - 1)
    for _, j, win in windows(trace, steps, window):
        if win is not None:
            p = P[j][win]
            out = p[np.argsort(-np.interp(p, _GRID, S), kind="stable")[B:]]
            seen += np.histogram(p, bins)[0]
            dropped += np.histogram(out, bins)[0]
    return seen / max(seen.sum(), 1), dropped / max(dropped.sum(), 1)


def replay(
    trace: list[dict],
    P: np.ndarray,
    steps: np.ndarray,
    level: np.ndarray,
    *,
    window: int,
    rules: dict[str, Rule] = RULES,
    score: dict[str, Callable[[np.ndarray], np.ndarray]] | None = None,
    seed: int = 0,
) -> dict:
    """trace: per step {step, prompt_ids, group_sizes, success_rate, epoch (optional, else
    step * B // N)} (GRPO: B groups of n); P (T, N): exact pass rates at snapshot steps `steps`
    (T,); level (N,) ints. score: per rule, what ranks its output instead of S (a test's rule that
    returns scores, not estimates of p). Returns {"n", "B", "window", "points": snapshot steps
    used, "gain": mean S(best B) - S(first B), "epochs": [epoch, ...], "rules": {name: {"all":
    capture, "points": its steps, "epochs": [capture per epoch], "epoch_points": [its steps per
    epoch]}}}; a capture is NaN where knowing p gains nothing or the rule had no step."""
    score = {**SCORES, **(score or {})}
    n, B = int(trace[0]["group_sizes"][0]), len(trace[0]["prompt_ids"])
    if any(len(t["prompt_ids"]) != B or set(t["group_sizes"]) != {n} for t in trace):
        raise ValueError("estimate_capture: every step must train B groups of n (a GRPO run)")
    if window < B:
        raise ValueError(f"--window {window} is smaller than the run's train_prompts {B}")
    N = P.shape[1]
    if level.shape != (N,):
        raise ValueError(f"estimate_capture: {len(level)} level ids for a pool of {N} prompts")
    S = signal_table(n)[n]
    sig = lambda p: np.interp(p, _GRID, S)  # noqa: E731
    view = View(N, level, n)
    # each rule its own generator, seeded by its name: a rule's draws do not depend on which
    # other rules run beside it
    rngs = {name: np.random.default_rng([seed, zlib.crc32(name.encode())]) for name in rules}
    rows: list[tuple[int, float, float, dict[str, float]]] = []  # epoch, first, best, per rule
    for t, j, win in windows(trace, steps, window):
        s = int(t["step"])
        if win is not None:
            p = P[j]
            ctx = {"p": p, "P": P, "steps": steps, "sig": sig}
            first, best = sig(p[win[:B]]).mean(), np.sort(sig(p[win]))[-B:].mean()
            got = {}
            for name, rule in rules.items():
                ctx["rng"] = rngs[name]
                est = rule(win, s, view, ctx)
                if est is None:  # nothing to go on at this step: left out of the rule's figure
                    got[name] = np.nan
                    continue
                est = score.get(name, sig)(np.asarray(est, dtype=float))
                got[name] = sig(p[win[np.argsort(-est, kind="stable")[:B]]]).mean()
            rows.append((int(t.get("epoch", s * B // N)), first, best, got))
        k = np.asarray(t["success_rate"], dtype=float) * n  # only now: rules saw the steps before
        view.add(s, np.asarray(t["prompt_ids"]), np.rint(k), np.asarray(t["group_sizes"], float))
    if not rows:
        raise ValueError("estimate_capture: no snapshot step has a full window after it")

    def capture(sel: list, name: str) -> tuple[float, int]:
        sel = [r for r in sel if not np.isnan(r[3][name])]
        if not sel:
            return float("nan"), 0
        first = np.mean([r[1] for r in sel])
        gain = np.mean([r[2] for r in sel]) - first
        got = np.mean([r[3][name] for r in sel])
        return (float((got - first) / gain) if gain > 0 else float("nan")), len(sel)

    epochs = sorted({r[0] for r in rows})
    out = {"n": n, "B": B, "window": window, "points": len(rows), "epochs": epochs}
    out["gain"] = float(np.mean([r[2] - r[1] for r in rows]))
    out["rules"] = {}
    for name in rules:
        whole, points = capture(rows, name)
        per = [capture([r for r in rows if r[0] == e], name) for e in epochs]
        out["rules"][name] = {
            "all": whole,
            "points": points,
            "epochs": [c for c, _ in per],
            "epoch_points": [k for _, k in per],
        }
    return out


def load_run(
    run: Path, column: str = "level"
) -> tuple[list[dict], np.ndarray, np.ndarray, np.ndarray]:
    """The trace, snapshots and group ids (by the task column `column`; one group where the task
    has no column of that name and `column` is "level") of a finished run trained with log_groups
    and log_pass_rates_every."""
    from rollalloc.tasks import run_pool
    from rollalloc.train.trainer import read_pass_rate_log

    if not (run / "run.json").is_file():
        raise ValueError(f"{run}: no run.json (not a finished run of rollalloc train)")
    run_json = json.loads((run / "run.json").read_text())
    cfg = run_json["config"]
    if cfg["strategy"] != "grpo":
        raise ValueError(f"{run}: strategy {cfg['strategy']!r}; the replay needs a GRPO run")
    recs = [json.loads(line) for line in open(run / "steps.jsonl")]
    if not recs or any("trained" not in r for r in recs):
        raise ValueError(f"{run}/steps.jsonl: train with --set log_groups=true (from step 0)")
    trace = [{"step": r["step"], "epoch": r["epoch"], **r["trained"]} for r in recs]
    steps, P = read_pass_rate_log(run)
    P = P.astype(float)  # (T, N)
    task = run_pool(cfg, run_json.get("pool_part"))
    if P.ndim != 2 or P.shape[1] != task.num_train:
        raise ValueError(
            f"{run}/pass_rates: vectors of {P.shape[1:]} for a pool of {task.num_train}"
        )
    col = task.train.get(column)
    if col is None and column != "level":
        raise ValueError(f"{run}: task {task.name} has no column {column!r} ({sorted(task.train)})")
    names = [str(x) for x in col] if col is not None else ["all"] * task.num_train
    _, level = np.unique(np.asarray(names, dtype=str), return_inverse=True)
    return trace, P, steps, level


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="GRPO run directories (log_groups, "
                    "log_pass_rates_every)")  # fmt: skip
    ap.add_argument("--window", type=int, default=None, help="candidates per step (default 1.25 B)")
    ap.add_argument("--column", default="level", help="the task column whose groups the rules' "
                    "means are of (default: level; e.g. arith's answer, as in rollalloc columns)")  # fmt: skip
    ap.add_argument("--fresh", default="", help="look sizes K,K,... for extra freshK rules")
    ap.add_argument("--bands", default="", help="band edges of p, e.g. 0,0.3,0.7,0.9,1.01: "
                    "where the knows-p choice drops prompts")  # fmt: skip
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    a = ap.parse_args(argv)
    results, bands = [], []
    try:
        try:
            looks = [int(x) for x in a.fresh.split(",") if x.strip()]
        except ValueError:
            raise ValueError(f"--fresh {a.fresh}: look sizes must be integers >= 1") from None
        try:
            edges = [float(x) for x in a.bands.split(",") if x.strip()]
        except ValueError:
            raise ValueError(f"--bands {a.bands}: edges must be numbers") from None
        if any(k < 1 for k in looks):
            raise ValueError(f"--fresh {a.fresh}: look sizes must be integers >= 1")
        if a.bands and (
            len(edges) < 2
            or not all(np.isfinite(edges))
            or any(not b > c for c, b in zip(edges, edges[1:]))
        ):
            raise ValueError(f"--bands {a.bands}: at least two finite, increasing edges")
        rules = {**RULES, **{f"fresh{k}": make_fresh(k) for k in looks}}
        for run in a.runs:
            trace, P, steps, level = load_run(run, a.column)
            B = len(trace[0]["prompt_ids"])
            W = a.window or round(1.25 * B)
            results.append(replay(trace, P, steps, level, window=W, rules=rules))
            if edges:
                bands.append(drop_bands(trace, P, steps, window=W, bins=edges))
    except (ValueError, OSError) as e:
        print(f"estimate_capture: {e}", file=sys.stderr)
        return 2
    if a.json:
        for r, (win, out) in zip(results, bands):
            r["bands"] = {"edges": edges, "window": win.tolist(), "dropped": out.tolist()}
        print(json.dumps(results, indent=1))
        return 0
    r0 = results[0]
    epochs = [e for e in r0["epochs"] if all(e in r["epochs"] for r in results)]
    print(f"capture of the knows-p gain, best {r0['B']} of {r0['window']} (n = {r0['n']}; "
          f"{len(results)} run(s), mean; epochs from 1; steps: snapshot steps behind a figure)")  # fmt: skip
    print(
        f"{'rule':10s} {'all':>6s} {'steps':>6s} "
        + " ".join(f"{'ep' + str(e + 1):>6s}" for e in epochs)
    )

    def mean(name: str, key: str, e: int | None = None) -> float:
        vals = [r["rules"][name][key] if e is None else r["rules"][name][key][r["epochs"].index(e)]
                for r in results]  # fmt: skip
        return float(np.mean(vals))

    for name in r0["rules"]:
        ep = [mean(name, "epochs", e) for e in epochs]
        print(f"{name:10s} {mean(name, 'all'):6.2f} {mean(name, 'points'):6.0f} "
              + " ".join(f"{x:6.2f}" for x in ep))  # fmt: skip
    if bands:
        win, out = np.mean([b[0] for b in bands], axis=0), np.mean([b[1] for b in bands], axis=0)
        print(
            f"where knowing p drops prompts (the {r0['window'] - r0['B']} of least S per window):"
        )
        print(f"{'band of p':16s} {'window':>7s} {'dropped':>8s}")
        for j in range(len(edges) - 1):
            print(f"[{edges[j]:.2f}, {edges[j + 1]:.2f})   {win[j]:7.1%} {out[j]:8.1%}")
    few = min(r["points"] for r in results)
    if few < 10:
        print(f"note: {few} snapshot steps in a run; the figures are of little weight")
    return 0


if __name__ == "__main__":
    sys.exit(main())
