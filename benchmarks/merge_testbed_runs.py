"""Merge testbed runs made by separate commands into one report (summary.json, curves, report.html).

Default: the runs of all eight strategies on the default testbed (runs/testbed-all8), after
`rollalloc compare --task arith --strategies grpo,dapo,pilot-commit,cero --seeds 0,1,2
--budget-rollouts 98304 --out runs/cmp3` and `rollalloc train` for the four peers x 3 seeds with the
same testbed config into runs/cmp3-peers/runs/STRATEGY/seedN:

    python benchmarks/merge_testbed_runs.py

Runs leave the machine that made them (runs/ is not in git, and a new checkout starts without it), so
`--export FILE.csv` writes the evaluations of every run read (one row per evaluation; the strategy
configs, budget and warm-start key to FILE.json beside it), and `--csv FILE.csv` (repeatable) reads
such files instead of or besides --roots: the report is rebuilt from the repository alone
(benchmarks/results/, without per-step records: rollouts and tokens to target, speedups and their
intervals, final accuracy are the same).

Any other set, e.g. the Pilot-Commit ablations of docs/testbed.md (each a directory
runs/cmp3-ablation/runs/NAME/seedN written by `rollalloc train --out ...`; NAME is the label in the
report, the baseline must be among them):

    python benchmarks/merge_testbed_runs.py --roots runs/cmp3/runs runs/cmp3-ablation/runs \\
        --out runs/cmp3-ablation-report
"""

import argparse
import csv
import json
import sys
from pathlib import Path

from rollalloc.preflight import parse_seeds
from rollalloc.report import write_report
from rollalloc.train.compare import read_jsonl, speedup_table

ORDER = ["grpo", "dapo", "pilot-commit", "cero", "speed-rl", "greso", "mopps", "knapsack"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--roots", nargs="+", default=["runs/cmp3/runs", "runs/cmp3-peers/runs"])
    ap.add_argument("--out", default="runs/testbed-all8")
    ap.add_argument("--seeds", default="0,1,2", help="seeds to merge: 0,1,2 or 0-9")
    ap.add_argument("--baseline", default="grpo")
    ap.add_argument("--fraction", type=float, default=0.9)
    ap.add_argument("--csv", action="append", default=[], help="evaluations exported by --export")
    ap.add_argument("--export", default=None, help="write the runs' evaluations to this CSV")
    ap.add_argument(
        "--allow-different-starts",
        action="store_true",
        help="merge runs of one warm-start key and seed that start at different accuracies",
    )
    args = ap.parse_args()
    try:
        seeds = parse_seeds(args.seeds)
    except ValueError as e:
        ap.error(str(e))

    runs, cfgs, budgets, keys, pools, prints = {}, {}, set(), {}, {}, {}
    source: dict[tuple[str, int], str] = {}  # (strategy, seed) -> the CSV it came from
    for path in args.csv:
        meta = json.loads(Path(path).with_suffix(".json").read_text())
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                seed = int(row.pop("seed"))
                if seed not in seeds:
                    continue
                name = row.pop("strategy")
                if source.setdefault((name, seed), path) != path:  # never mix two runs' evals
                    raise SystemExit(
                        f"{name} seed {seed} is in both {source[name, seed]} and {path}: "
                        "pass only one of them (or --seeds without that seed)"
                    )
                rec = {k: float(v) for k, v in row.items() if v != ""}
                rec["step"], rec["cum_rollouts"] = int(rec["step"]), int(rec["cum_rollouts"])
                runs.setdefault(name, {}).setdefault(seed, {"evals": [], "steps": []})
                runs[name][seed]["evals"].append(rec)
        for name, m in meta.items():
            if name in runs:
                cfgs[name] = m["strategy_config"]
                budgets.add(m["budget_rollouts"])
                keys[name] = m.get("warm_start_key")
                prints[name] = m.get("warm_start_fingerprint")
                if m.get("pool_levels") is not None:
                    pools[name] = m["pool_levels"]
    for root in args.roots if not args.csv or args.roots != ap.get_default("roots") else []:
        for sdir in sorted(Path(root).iterdir()):
            for seed in seeds:
                d = sdir / f"seed{seed}"
                if not (d / "run.json").is_file():
                    continue
                runs.setdefault(sdir.name, {})[seed] = {
                    "evals": read_jsonl(d / "evals.jsonl"),
                    "steps": read_jsonl(d / "steps.jsonl"),
                }
                run_json = json.loads((d / "run.json").read_text())
                config = run_json["config"]
                cfgs[sdir.name] = config.get("strategy_config", {})
                budgets.add(config["budget_rollouts"])
                keys[sdir.name] = (run_json.get("warm_start") or {}).get("key")
                prints[sdir.name] = (run_json.get("warm_start") or {}).get("fingerprint")
                if config.get("pool_levels") is not None:  # GRPO on part of the pool
                    pools[sdir.name] = config["pool_levels"]
    if args.baseline not in runs:
        raise SystemExit(f"no runs of the baseline {args.baseline!r} under {args.roots}")
    if not args.allow_different_starts:
        problem = different_starts(runs, keys, prints)
        if problem:
            raise SystemExit(problem)
    if len(budgets) != 1:
        raise SystemExit(f"the runs have different budgets {sorted(budgets)}: not comparable")
    names = [s for s in ORDER if s in runs] + sorted(set(runs) - set(ORDER))
    runs = {s: runs[s] for s in names}
    print({s: sorted(v) for s, v in runs.items()})
    missing = {s: sorted(set(seeds) - set(v)) for s, v in runs.items() if set(seeds) - set(v)}
    if missing:  # a run still going or failed: its strategy is compared on fewer seeds
        print(f"warning: seeds asked for but without a finished run (run.json): {missing}",
              file=sys.stderr)  # fmt: skip
    if args.export:
        export(args.export, runs, cfgs, budgets, keys, pools, prints)
    summary = write_report(
        args.out,
        kind="compare",
        task="arith",
        seeds=seeds,
        budget_rollouts=budgets.pop(),
        runs=runs,
        strategy_configs={s: cfgs[s] for s in runs},
        baseline=args.baseline,
        fraction=args.fraction,
        extra={"merged_from": args.roots},
    )
    print(speedup_table(summary))
    t5 = summary["targets_at"]["0.5"]
    fmt = lambda v: "never" if v is None else f"{v:,.0f}"  # noqa: E731
    print(
        f"half of {args.baseline}'s gain (target {t5['value']:.4f}), rollouts to it: "
        + ", ".join(f"{s} {fmt(v)}" for s, v in t5["rollouts_to_target"].items())
    )
    print("per strategy: rollouts to target per seed; mean effective prompt ratio; rollouts spent")
    for s, v in summary["strategies"].items():
        per_seed = " / ".join(fmt(x) for x in v["per_seed_rollouts_to_target"])
        ratio = v["mean_effective_prompt_ratio"]
        print(
            f"  {s}: {per_seed}; {'-' if ratio is None else f'{ratio:.2f}'}; {v['total_rollouts']:,}"
        )


START_TOLERANCE = 1e-6  # the same policy on another machine's CPUs: equal to ~1e-8


def different_starts(runs: dict, keys: dict, prints: dict | None = None) -> str | None:
    """Why the runs cannot be compared, or None: runs of one warm-start key and one seed must start
    at one held-out accuracy (the same policy on the same evaluation set). A warm start rebuilt
    under another torch / transformers keeps its key and trains another policy (session 39:
    ws0 0.5066 against 0.5022), so the key alone does not show it; the weights' fingerprint
    (run.json warm_start.fingerprint, since session 39) and the first evaluation do."""
    by_key: dict[str, dict[str, str]] = {}
    for name, fp in (prints or {}).items():
        if fp is not None and name in runs:
            by_key.setdefault(keys.get(name), {})[name] = fp
    for key, fps in sorted(by_key.items(), key=lambda kv: str(kv[0])):
        if len(set(fps.values())) > 1:
            shown = ", ".join(f"{n} {fp}" for n, fp in sorted(fps.items()))
            return (
                f"runs of warm-start key {key} start from different policies: weights "
                f"fingerprints {shown}. A warm start rebuilt in another environment keeps its key "
                "(docs/design-notes.md, session 39): merge runs of one build, or pass "
                "--allow-different-starts to compare them anyway"
            )
    starts: dict[tuple, dict[str, float]] = {}
    for name, by_seed in runs.items():
        for seed, r in by_seed.items():
            first = min(r["evals"], key=lambda e: e["cum_rollouts"])
            starts.setdefault((keys.get(name), seed), {})[name] = float(first["accuracy"])
    bad = {k: v for k, v in starts.items() if max(v.values()) - min(v.values()) > START_TOLERANCE}
    if not bad:
        return None
    (key, seed), accs = next(iter(sorted(bad.items(), key=lambda kv: str(kv[0]))))
    shown = ", ".join(f"{n} {a:.6f}" for n, a in sorted(accs.items(), key=lambda kv: kv[1]))
    return (
        f"runs of warm-start key {key} start from different policies: seed {seed} starts at "
        f"{shown} ({len(bad)} (key, seed) pairs differ). A warm start rebuilt in another "
        "environment keeps its key (docs/design-notes.md, session 39): merge runs of one build, "
        "or pass --allow-different-starts to compare them anyway"
    )


def export(
    path: str, runs: dict, cfgs: dict, budgets: set, keys: dict, pools: dict, prints: dict
) -> None:
    """Evaluations of every run to `path` (CSV), configs, budget and warm-start key beside it."""
    fields = ["strategy", "seed"] + sorted(
        {
            k
            for by_seed in runs.values()
            for r in by_seed.values()
            for e in r["evals"]
            for k in e
            if k not in ("wall_s",)
        }  # fmt: skip
        - {"strategy", "seed"},
        key=lambda k: (k not in ("step", "cum_rollouts", "cum_tokens"), k),
    )
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for name, by_seed in runs.items():
            for seed, r in sorted(by_seed.items()):
                for e in r["evals"]:
                    w.writerow(
                        {
                            "strategy": name,
                            "seed": seed,
                            **{
                                k: (f"{v:.9g}" if isinstance(v, float) else v) for k, v in e.items()
                            },
                        }
                    )
    meta = {name: {"strategy_config": cfgs[name], "budget_rollouts": next(iter(budgets)),
                   "warm_start_key": keys.get(name)} for name in runs}  # fmt: skip
    for name in set(runs) & set(pools):  # GRPO on part of the pool
        meta[name]["pool_levels"] = pools[name]
    for name in runs:  # the warm start's weights (run.json since session 39)
        if prints.get(name) is not None:
            meta[name]["warm_start_fingerprint"] = prints[name]
    Path(path).with_suffix(".json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    print(f"exported {sum(len(v) for v in runs.values())} runs to {path}")


if __name__ == "__main__":
    main()
