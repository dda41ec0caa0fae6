"""Simulate named variants of strategies on one pool, one `rollalloc simulate` run each, and write one
evaluation CSV in which every variant carries its own name (what `benchmarks/ranking_power.py
--sim` and `merge_testbed_runs.py` read beside the real runs of the same names).

    python benchmarks/sim_variants.py --out runs/sim-paper grpo=grpo pilot-commit=pilot-commit \\
        lrQFp=likelihood-rank:unseen=wrong,strata=level,quota=true,fill=true,window=4 \\
        -- --preset benchmarks/presets/testbed-paper-s14.json --group-size 32 --train-prompts 16 \\
        --budget-rollouts 98304 --eval-every-rollouts 4096 --seeds 0,1,2,3,4 --set sim.short_answers=12

A variant is NAME=STRATEGY[:KEY=VALUE,...] (the strategy's options, as `--set
options.STRATEGY.KEY=VALUE`). Each run also simulates the baseline (`grpo`), whose rows are kept
once; the arguments after `--` go to every run. OUT/NAME/ holds each run's report, OUT/curves.csv
all evaluations (the `strategy` column set to the variant's name), OUT/speedups.json each variant's
speedup over the baseline and its 90% interval as its own run's summary.json has them.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
from pathlib import Path


def parse_variant(spec: str) -> tuple[str, str, list[str]]:
    """ "NAME=STRATEGY:k=v,k=v" -> (NAME, STRATEGY, ["options.STRATEGY.k=v", ...])."""
    name, sep, rest = spec.partition("=")
    if not sep or not name or not rest:
        raise SystemExit(f"variant {spec!r}: write NAME=STRATEGY[:KEY=VALUE,...]")
    strategy, _, opts = rest.partition(":")
    sets = []
    for kv in filter(None, opts.split(",")):
        key, eq, value = kv.partition("=")
        if not eq or not key:
            raise SystemExit(f"variant {name}: option {kv!r} is not KEY=VALUE")
        sets.append(f"options.{strategy}.{key}={value}")
    return name, strategy, sets


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    common = argv[argv.index("--") + 1 :] if "--" in argv else []
    own = argv[: argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--baseline", default="grpo")
    ap.add_argument("variants", nargs="+", help="NAME=STRATEGY[:KEY=VALUE,...]")
    a = ap.parse_args(own)
    variants = [parse_variant(v) for v in a.variants]
    names = [v[0] for v in variants]
    if len(set(names)) != len(names):
        raise SystemExit(f"variant names repeat: {names}")
    out = Path(a.out)
    if (out / "curves.csv").exists():
        raise SystemExit(f"{out}/curves.csv exists: choose another --out (nothing is overwritten)")
    rows: list[dict[str, str]] = []
    speedups: dict[str, dict] = {}
    have_baseline = False  # every run simulates the baseline too: keep the first run's rows
    for name, strategy, sets in variants:
        run = out / name
        strategies = [strategy] if strategy == a.baseline else [a.baseline, strategy]
        cmd = [
            sys.executable,
            "-m",
            "rollalloc.cli",
            "simulate",
            "--no-progress",
            "--out",
            str(run),
        ]
        cmd += ["--strategies", ",".join(strategies), "--baseline", a.baseline, *common]
        for s in sets:
            cmd += ["--set", s]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"{name}: rollalloc simulate failed\n{done.stderr[-3000:]}")
        with open(run / "curves.csv", newline="") as f:
            for row in csv.DictReader(f):
                if row["strategy"] == strategy:
                    rows.append({**row, "strategy": name})
                elif row["strategy"] == a.baseline and not have_baseline:
                    rows.append(row)
        have_baseline = True
        summary = json.loads((run / "summary.json").read_text())
        speedups[name] = {  # (the baseline's own entries are empty)
            "speedup": summary["speedup"].get(strategy, {}).get(a.baseline),
            "interval": summary["speedup_ci"].get(strategy, {}).get(a.baseline),
            "rollouts_to_target": summary["strategies"][strategy]["rollouts_to_target"],
        }
        print(f"{name:>12}: {speedups[name]['speedup']} {speedups[name]['interval']}", flush=True)
    fields = list(dict.fromkeys(k for r in rows for k in r))
    with open(out / "curves.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    (out / "speedups.json").write_text(json.dumps(speedups, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
