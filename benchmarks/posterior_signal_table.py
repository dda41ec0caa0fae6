"""Issue 17: the results table of docs/posterior-signal.md.

# merge runs of the same pool, budget and seeds made by separate `rollalloc simulate` commands
# (e.g. the peers of runs/i12-sim-dapo17k-2048000 and posterior-signal of runs/i17-dapo17k-ps);
# the first directory's strategies win where both have one, except those named by --take
python benchmarks/posterior_signal_table.py merge OUT DIR1 DIR2 [--take posterior-signal]

# the table (markdown): rollouts and tokens to target with 90% intervals, speedup vs grpo
python benchmarks/posterior_signal_table.py table DIR [DIR ...]
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
from pathlib import Path

from rollalloc.report.writer import rebuild_report

ORDER = [
    "grpo",
    "dapo",
    "pilot-commit",
    "cero",
    "speed-rl",
    "greso",
    "mopps",
    "knapsack",
    "oracle",
    "oracle-greedy",
    "posterior-signal",
]


def merge(out: Path, dirs: list[Path], take: set[str]) -> None:
    out.mkdir(parents=True, exist_ok=False)
    owner: dict[str, Path] = {}
    for d in dirs:
        with open(d / "curves.csv") as f:
            names = {r["strategy"] for r in csv.DictReader(f)}
        for s in sorted(names):
            if s not in owner or s in take and d != dirs[0]:
                owner[s] = d
    header, rows = None, []
    for d in dirs:
        with open(d / "curves.csv") as f:
            rd = csv.reader(f)
            h = next(rd)
            header = header or h
            assert h == header, f"{d}: curves.csv columns differ"
            rows += [r for r in rd if owner[r[0]] == d]
    with open(out / "curves.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    with open(out / "steps.jsonl", "w") as f:
        for d in dirs:
            for line in open(d / "steps.jsonl"):
                if owner[json.loads(line)["strategy"]] == d:
                    f.write(line)
    meta = json.load(open(dirs[0] / "summary.json"))
    for d in dirs[1:]:
        m = json.load(open(d / "summary.json"))
        assert (m["seeds"], m["budget_rollouts"], m["task"]) == (
            meta["seeds"],
            meta["budget_rollouts"],
            meta["task"],
        ), f"{d}: not the same pool, seeds and budget as {dirs[0]}"
        for s, cfg in m.get("strategy_configs", {}).items():
            if owner.get(s) == d:
                meta.setdefault("strategy_configs", {})[s] = cfg
    meta["merged_from"] = {s: str(d) for s, d in owner.items()}
    json.dump(meta, open(out / "summary.json", "w"), indent=2)
    rebuild_report(out)
    s = json.load(open(out / "summary.json"))
    s["merged_from"] = meta["merged_from"]
    json.dump(s, open(out / "summary.json", "w"), indent=2)
    for d in dirs:
        if (d / "config.json").exists() and not (out / "config.json").exists():
            shutil.copy(d / "config.json", out / "config.json")


def fmt(v, k=1e3, unit="k"):
    return "never" if v is None else f"{v / k:,.0f}{unit}"


def table(dirs: list[Path]) -> None:
    for d in dirs:
        s = json.load(open(d / "summary.json"))
        st = s["strategies"]
        print(
            f"\n{s['task']} ({d}): seeds {s['seeds']}, budget {s['budget_rollouts']:,}, "
            f"target {s['target']['value']:.4f}"
        )
        print(
            "| strategy | rollouts to target [90%] | tokens to target | speedup vs grpo [90%] "
            "| vs oracle | final acc | eff. ratio |"
        )
        print("|---|---|---|---|---|---|---|")
        oracle = st.get("oracle", {}).get("rollouts_to_target")
        for name in [n for n in ORDER if n in st] + [n for n in st if n not in ORDER]:
            v = st[name]
            r = v.get("rollouts_to_target")
            iv = v.get("rollouts_to_target_ci")
            ivs = (
                f" [{fmt(iv[0])}, {fmt(iv[1])}]" if isinstance(iv, list) and None not in iv else ""
            )
            spv = (s.get("speedup", {}).get(name) or {}).get("grpo")
            spi = (s.get("speedup_ci", {}).get(name) or {}).get("grpo")
            sps = "-" if spv is None else f"{spv:.2f}"
            if isinstance(spi, list) and None not in spi:
                sps += f" [{spi[0]:.2f}, {spi[1]:.2f}]"
            vo = f"{r / oracle:.2f}" if r and oracle else "-"
            tok = v.get("tokens_to_target")
            print(
                f"| {name} | {fmt(r)}{ivs} | {fmt(tok, 1e6, 'M')} | {sps} | {vo} | "
                f"{v.get('final_accuracy', float('nan')):.4f} | "
                f"{v.get('mean_effective_prompt_ratio', float('nan')):.2f} |"
            )
        peers = {  # the best peer: the fastest to target, neither the baseline nor the oracles
            n: v["rollouts_to_target"]
            for n, v in st.items()
            if n not in ("grpo", "posterior-signal") and not n.startswith("oracle")
            and v.get("rollouts_to_target")
        }  # fmt: skip
        if peers and "posterior-signal" in st:
            best = min(peers, key=peers.get)
            spv = (s.get("speedup", {}).get("posterior-signal") or {}).get(best)
            spi = (s.get("speedup_ci", {}).get("posterior-signal") or {}).get(best)
            verdict = (s.get("speedup_verdict", {}).get("posterior-signal") or {}).get(best)
            sps = "-" if spv is None else f"{spv:.2f}x"
            if isinstance(spi, list):
                sps += " [" + ", ".join("never" if x is None else f"{x:.2f}" for x in spi) + "]"
            print(f"posterior-signal vs the best peer ({best}): {sps} {verdict or ''}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("merge")
    m.add_argument("out", type=Path)
    m.add_argument("dirs", type=Path, nargs="+")
    m.add_argument("--take", default="posterior-signal,grpo")
    t = sub.add_parser("table")
    t.add_argument("dirs", type=Path, nargs="+")
    a = ap.parse_args()
    if a.cmd == "merge":
        merge(a.out, a.dirs, set(a.take.split(",")))
    else:
        table(a.dirs)


if __name__ == "__main__":
    main()
