"""Print a comparison's summary.json as the markdown table the docs use.

    python benchmarks/summary_table.py runs/i12-sim-dapo17k-2048000 [--old OLD_SUMMARY_DIR]

Columns: rollouts to the 0.9 target (seed mean curve, interpolated between evaluations; per seed
in parentheses when they differ; its bootstrap interval over seeds in brackets), speedup vs the
baseline with its interval and verdict ("faster", "slower", "within noise", "undefined"), rollouts
to the 0.5 target and the speedup vs dapo there (DAPO rarely reaches the 0.9 target), rollouts to
target over the oracle's, final accuracy with its interval, the final-accuracy difference from the
baseline with its interval and verdict, and the mean effective prompt ratio. With --old, a column
with the old summary's rollouts to target beside the new. Reads schema rollalloc.summary/1 (no
intervals) and /2; the summary's warnings are printed above the table.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rollalloc.report import load_summary, warnings_text
from rollalloc.report.text import final_diff_text, interval_text, speedup_text


def _fmt(x: float | None) -> str:
    if x is None:
        return "never"
    return f"{x / 1e6:.2f}M" if x >= 1e6 else f"{int(round(x)):,}"


def _ratio(a: float | None, b: float | None) -> str:
    return f"{b / a:.2f}" if a and b else "–"


def _interval(ci: list | None) -> str:
    if not ci:
        return ""
    lo, hi = ci
    return " [" + _fmt(lo) + ", " + _fmt(hi) + "]"


def table(summary: dict, old: dict | None = None) -> str:
    strategies = summary["strategies"]
    base = summary["target"]["baseline"]
    half = summary.get("targets_at", {}).get("0.5", {}).get("rollouts_to_target", {})
    r_base = strategies[base]["rollouts_to_target"]
    r_oracle = strategies.get("oracle", {}).get("rollouts_to_target")
    has_ci = "speedup_ci" in summary
    head = ["strategy", "rollouts to target (per seed) [interval]", f"vs {base}"]
    if "dapo" in strategies:
        head += ["to 0.5 target", "vs dapo @0.5"]
    if r_oracle:
        head += ["/ oracle"]
    if old is not None:
        head += ["before (rollouts, vs grpo)"]
    head += ["final acc"] + ([f"final acc - {base}"] if has_ci else []) + ["eff. prompt ratio"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, s in strategies.items():
        r = s["rollouts_to_target"]
        per = s.get("per_seed_rollouts_to_target") or []
        cell = _fmt(r)
        if per and len(set(per)) > 1:
            cell += " (" + " / ".join(_fmt(p) for p in per) + ")"
        cell += _interval(s.get("rollouts_to_target_ci"))
        vs = "–" if name == base else speedup_text(summary, name, base).replace("n/a", "–")
        row = [name, cell, vs if has_ci else _ratio(r, r_base)]
        if "dapo" in strategies:
            row += [_fmt(half.get(name)), _ratio(half.get(name), half.get("dapo"))]
        if r_oracle:
            row += [f"{r / r_oracle:.2f}" if r else "–"]
        if old is not None:
            o = old["strategies"].get(name)
            ob = old["strategies"][base]["rollouts_to_target"]
            row += (
                [f"{_fmt(o['rollouts_to_target'])}, {_ratio(o['rollouts_to_target'], ob)}"]
                if o
                else ["–"]
            )
        final = f"{s['final_accuracy']:.3f}"
        if s.get("final_accuracy_ci"):
            final += " " + interval_text(s["final_accuracy_ci"], ".3f")
        row += [final]
        if has_ci:
            row += [final_diff_text(summary, name, 3) or "–"]
        epr = s.get("mean_effective_prompt_ratio")
        row += ["–" if epr is None else f"{epr:.2f}"]
        rows.append("| " + " | ".join(row) + " |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="directory with summary.json")
    ap.add_argument("--old", type=Path, help="an older comparison's directory, for a before column")
    a = ap.parse_args()
    summary = load_summary(a.run)
    old = load_summary(a.old) if a.old else None
    for w in warnings_text(summary):
        print(w)
    print(
        f"acc0 {summary['initial_accuracy']:.4f}, target {summary['target']['value']:.4f}, "
        f"budget {summary['budget_rollouts']:,}, seeds {summary['seeds']}"
    )
    print(table(summary, old))


if __name__ == "__main__":
    main()
