"""Print a comparison's summary.json as the markdown table the docs use.

    python benchmarks/summary_table.py runs/i12-sim-dapo17k-2048000 [--old OLD_SUMMARY_DIR]

Columns: rollouts to the 0.9 target (seed mean curve; per seed in brackets when they differ),
speedup vs the baseline, rollouts to the 0.5 target and the speedup vs dapo there (DAPO rarely
reaches the 0.9 target), rollouts to target over the oracle's, final accuracy and the mean effective
prompt ratio. With --old, a column with the old summary's rollouts to target beside the new.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def _fmt(x: float | None) -> str:
    if x is None:
        return "never"
    return f"{x / 1e6:.2f}M" if x >= 1e6 else f"{int(round(x)):,}"


def _ratio(a: float | None, b: float | None) -> str:
    return f"{b / a:.2f}" if a and b else "–"


def table(summary: dict, old: dict | None = None) -> str:
    strategies = summary["strategies"]
    base = summary["target"]["baseline"]
    half = summary.get("targets_at", {}).get("0.5", {}).get("rollouts_to_target", {})
    r_base = strategies[base]["rollouts_to_target"]
    r_oracle = strategies.get("oracle", {}).get("rollouts_to_target")
    head = ["strategy", "rollouts to target (per seed)", f"vs {base}"]
    if "dapo" in strategies:
        head += ["to 0.5 target", "vs dapo @0.5"]
    if r_oracle:
        head += ["/ oracle"]
    if old is not None:
        head += ["before (rollouts, vs grpo)"]
    head += ["final acc", "eff. prompt ratio"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, s in strategies.items():
        r = s["rollouts_to_target"]
        per = s.get("per_seed_rollouts_to_target") or []
        cell = _fmt(r)
        if per and len(set(per)) > 1:
            cell += " (" + " / ".join(_fmt(p) for p in per) + ")"
        row = [name, cell, _ratio(r, r_base)]
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
        row += [f"{s['final_accuracy']:.3f}", f"{s['mean_effective_prompt_ratio']:.2f}"]
        rows.append("| " + " | ".join(row) + " |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="directory with summary.json")
    ap.add_argument("--old", type=Path, help="an older comparison's directory, for a before column")
    a = ap.parse_args()
    summary = json.loads((a.run / "summary.json").read_text())
    old = json.loads((a.old / "summary.json").read_text()) if a.old else None
    print(
        f"acc0 {summary['initial_accuracy']:.4f}, target {summary['target']['value']:.4f}, "
        f"budget {summary['budget_rollouts']:,}, seeds {summary['seeds']}"
    )
    print(table(summary, old))


if __name__ == "__main__":
    main()
