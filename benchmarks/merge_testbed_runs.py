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
                if seed not in runs.setdefault(name, {}):  # the run's first row
                    runs[name][seed] = {"evals": [], "steps": []}
                    prints[name, seed] = (meta.get(name) or {}).get("warm_start_fingerprint")
                runs[name][seed]["evals"].append(rec)
        for name, m in meta.items():
            if name in runs:
                cfgs[name] = m["strategy_config"]
                budgets.add(m["budget_rollouts"])
                keys[name] = m.get("warm_start_key")
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
                prints[sdir.name, seed] = (run_json.get("warm_start") or {}).get("fingerprint")
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
    """Why the runs cannot be compared, or None. Runs of one warm-start key start from one policy:
    their weights' fingerprints (`prints[(name, seed)]`, run.json warm_start.fingerprint since
    session 39) must agree, and, where not every run's is known, so must their first evaluations:
    at one seed across strategies, and, where every strategy's start does not depend on the seed
    (an exact evaluation), across strategies whatever their seeds. A warm start rebuilt under
    another torch / transformers keeps its key and trains another policy (session 39: ws0 0.5066
    against 0.5022), so the key alone does not show it."""
    prints = {k: v for k, v in (prints or {}).items() if v is not None}
    starts: dict[str, dict[str, dict[int, float]]] = {}  # key -> strategy -> seed -> start
    for name, by_seed in runs.items():
        for seed, r in by_seed.items():
            first = min(r["evals"], key=lambda e: e["cum_rollouts"])
            starts.setdefault(keys.get(name), {}).setdefault(name, {})[seed] = first["accuracy"]

    def spread(values) -> float:
        values = list(values)
        return max(values) - min(values)

    def refused(key, what: str) -> str:
        return (
            f"runs of warm-start key {key} start from different policies: {what}. A warm start "
            "rebuilt in another environment keeps its key (docs/design-notes.md, session 39): "
            "merge runs of one build, or pass --allow-different-starts to compare them anyway"
        )

    for key, by_name in sorted(starts.items(), key=lambda kv: str(kv[0])):
        fps = {(n, sd): prints[n, sd] for n, v in by_name.items() for sd in v if (n, sd) in prints}
        if len(set(fps.values())) > 1:
            names: dict[str, set[str]] = {}
            for (n, _), fp in fps.items():
                names.setdefault(n, set()).add(fp)
            shown = ", ".join(f"{n} {'/'.join(sorted(f))}" for n, f in sorted(names.items()))
            return refused(key, f"weights fingerprints {shown}")
        if len(fps) == sum(len(v) for v in by_name.values()):
            continue  # every run's weights are known and one: a sampled first evaluation may vary
        bad = {}
        for seed in sorted({sd for v in by_name.values() for sd in v}):
            accs = {n: v[seed] for n, v in by_name.items() if seed in v}
            if spread(accs.values()) > START_TOLERANCE:
                bad[seed] = accs
        if bad:
            seed, accs = next(iter(bad.items()))
            shown = ", ".join(f"{n} {a:.6f}" for n, a in sorted(accs.items(), key=lambda kv: kv[1]))
            return refused(
                key, f"seed {seed} starts at {shown} ({len(bad)} (key, seed) pairs differ)"
            )
        fixed = {  # strategies whose start does not depend on the seed (two seeds or more)
            n: next(iter(v.values()))
            for n, v in by_name.items()
            if len(v) >= 2 and spread(v.values()) <= START_TOLERANCE
        }
        if len(fixed) == len(by_name) and spread(fixed.values()) > START_TOLERANCE:
            shown = ", ".join(
                f"{n} {a:.6f}" for n, a in sorted(fixed.items(), key=lambda kv: kv[1])
            )
            return refused(key, f"every seed of each starts at one accuracy: {shown}")
    return None


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
    for name, by_seed in runs.items():  # the warm start's weights (run.json since session 39)
        fps = {prints.get((name, seed)) for seed in by_seed}
        if len(fps) == 1 and None not in fps:
            meta[name]["warm_start_fingerprint"] = fps.pop()
    Path(path).with_suffix(".json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    print(f"exported {sum(len(v) for v in runs.values())} runs to {path}")


if __name__ == "__main__":
    main()
