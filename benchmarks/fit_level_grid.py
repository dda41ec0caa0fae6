"""Fit a few free parameters of a simulator preset to real GRPO runs by a grid: every combination
is simulated (GRPO only) and scored by the squared distance of its per-level held-out curves to the
real ones; the candidate of lowest loss is written as a preset. Nothing but GRPO enters the fit, so
the peers simulated on the result afterwards are predictions (docs/simulator.md, "Session 39").

    python benchmarks/fit_level_grid.py --preset benchmarks/presets/testbed-default-disjoint-s37-measured.json \\
        --real benchmarks/results/default-testbed-s36-disjoint.csv:dGrpo:64 \\
        --real benchmarks/results/default-testbed-s36-disjoint32.csv:dGrpo32:32 \\
        --grid sim.contrast_decay=0,1,2,4 --grid gains=0.5,1,2 --grid 2x1d.ceiling=0.65,0.8 \\
        --seeds 0,1,2,3 --out best.json -- --group-size 8 --budget-rollouts 98304 \\
        --eval-every-rollouts 8192 --set sim.short_answers=12

A grid axis is KEY=V1,V2,...: `sim.FIELD` a SimConfig field of the preset; `gains` a factor on
`global_gain` and `cluster_gain` together (their ratio kept); `LEVEL.FIELD` a field of one level of
the preset (`ceiling`, `learnable_share`, `plasticity`), or of several at once (`3x1d/4x1d.plasticity`). A `sim.FIELD` axis may hold words
(`--grid sim.repeat_unit=visits`: one value, fixed in every candidate and in the preset written). `--real CSV:NAME:TRAIN_PROMPTS[:KEY=VALUE,...]` is one
set of real runs (an evaluation CSV of `merge_testbed_runs.py --export`, strategy NAME) simulated
with `--train-prompts TRAIN_PROMPTS` and GRPO's options KEY=VALUE (`small_every=1`: GRPO with a
one-prompt step after each full one). `--gap NAME=BASE` scores set NAME by its per-level difference
from set BASE (each side's own, BASE interpolated at NAME's evaluations; an evaluation of NAME past
BASE's last one is left out): what an option costs
GRPO on a warm start the preset was not fitted to, without paying for that warm start's levels
(BASE is scored only through the difference, unless `--score-base BASE`). The loss of a candidate sums, over the real sets, the levels and
the evaluation points both have, (simulated seed-mean - real seed-mean)^2 of the held-out accuracy
of each level; with --from-start, of each level's gain over its start on each side (a preset whose
start is off for a level then pays for that level's learning only). The arguments after `--` go to every `rollalloc simulate`.
"""

from __future__ import annotations

import argparse
import copy
import csv
import itertools
import json
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np

from rollalloc.sim.policy import Level, SimConfig


def parse_axis(spec: str) -> tuple[str, list[float | str]]:
    key, eq, values = spec.partition("=")
    if not eq or not key or not values:
        raise SystemExit(f"--grid {spec!r}: write KEY=V1,V2,...")

    def value(v: str) -> int | float | str:  # a number, or a word for a field such as repeat_unit
        try:  # an integer stays one (SimConfig.repeat_grace refuses 2.0)
            return int(v)
        except ValueError:
            pass
        try:
            return float(v)
        except ValueError:
            if key == "gains" or not key.startswith("sim."):
                raise SystemExit(f"--grid {spec!r}: the values of {key} must be numbers") from None
            return v

    vals = [value(v) for v in values.split(",") if v]
    if not vals:
        raise SystemExit(f"--grid {spec!r}: no values")
    return key, vals


def level_curves(path: Path, name: str) -> dict[str, dict[float, float]]:
    """curves[level][cum_rollouts] = seed-mean held-out accuracy of strategy `name` in CSV `path`."""
    acc: dict[str, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        if not {"strategy", "cum_rollouts"} <= set(reader.fieldnames or []):
            raise SystemExit(f"{path}: not an evaluation CSV (no strategy / cum_rollouts column)")
        for row in reader:
            if row["strategy"] != name:
                continue
            x = float(row["cum_rollouts"])
            for k, v in row.items():
                if k.startswith("accuracy_") and k[len("accuracy_") :][:1].isdigit() and v:
                    acc[k[len("accuracy_") :]][x].append(float(v))
    if not acc:
        raise SystemExit(f"{path}: no per-level accuracy rows of strategy {name!r}")
    return {lv: {x: sum(v) / len(v) for x, v in by.items()} for lv, by in acc.items()}


def difference(curves: dict, base: dict) -> dict:
    """curves - base, per level, at the evaluations of `curves` that lie within base's range
    (base linearly interpolated: GRPO with small steps evaluates at other cum_rollouts)."""
    out = {}
    for lv, by in curves.items():
        if lv in base:
            bx = sorted(base[lv])
            inside = [x for x in by if bx[0] <= x <= bx[-1]]
            b = np.interp(inside, bx, [base[lv][x] for x in bx])
            out[lv] = {x: by[x] - float(v) for x, v in zip(inside, b)}
    return out


def apply(preset: dict, key: str, value: float | str) -> None:
    """Set one grid coordinate in `preset` (in place)."""
    sim = preset.setdefault("sim", {})
    if key == "gains":
        for g in ("global_gain", "cluster_gain"):
            if g not in sim:
                raise SystemExit(f"gains: the preset's sim has no {g}")
            sim[g] = sim[g] * float(value)
        return
    head, _, field = key.partition(".")
    if not field:
        raise SystemExit(f"--grid {key!r}: write sim.FIELD, LEVEL.FIELD or gains")
    if head == "sim":
        if field not in SimConfig.__dataclass_fields__:
            raise SystemExit(f"--grid {key!r}: SimConfig has no field {field!r}")
        sim[field] = value
        return
    if field not in Level.__dataclass_fields__ or field == "name":
        raise SystemExit(f"--grid {key!r}: a level has no field {field!r}")
    levels = {lv["name"]: lv for lv in preset.get("levels", [])}
    for name in head.split("/"):  # LEVEL/LEVEL/... .FIELD: one value for several levels
        if name not in levels:
            raise SystemExit(
                f"--grid {key!r}: the preset has no level {name!r} (has {sorted(levels)})"
            )
        levels[name][field] = value


def simulate(
    preset: dict, train_prompts: int, seeds: str, common: list[str], work: Path, options=()
) -> Path:
    work.mkdir(parents=True)
    path = work / "preset.json"
    path.write_text(json.dumps(preset))
    out = work / "sim"
    cmd = [sys.executable, "-m", "rollalloc.cli", "simulate", "--no-progress", "--out", str(out)]
    cmd += ["--preset", str(path), "--strategies", "grpo", "--seeds", seeds]
    cmd += ["--train-prompts", str(train_prompts), *common]
    for kv in options:
        cmd += ["--set", f"options.grpo.{kv}"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"rollalloc simulate failed\n{done.stderr[-3000:]}")
    return out / "curves.csv"


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    common: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, common = argv[:i], argv[i + 1 :]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", required=True)
    ap.add_argument("--real", action="append", required=True,
                    help="CSV:NAME:TRAIN_PROMPTS[:KEY=VALUE,...] (GRPO's options)")  # fmt: skip
    ap.add_argument("--grid", action="append", default=[], help="KEY=V1,V2,...")
    ap.add_argument("--seeds", default="0,1,2,3")
    ap.add_argument("--out", help="the best candidate's preset")
    ap.add_argument("--table", help="every candidate's loss (JSON)")
    ap.add_argument("--gap", action="append", default=[],
                    help="NAME=BASE: score set NAME by its difference from set BASE, and BASE "
                         "only through that difference")  # fmt: skip
    ap.add_argument("--score-base", dest="real_base_scored", action="append", default=[],
                    help="NAME: a gap's base also scored on its own")  # fmt: skip
    ap.add_argument("--from-start", action="store_true",
                    help="score each level's gain over its own start (cum_rollouts 0 on each "
                         "side), not its accuracy: a start the preset misses costs nothing")  # fmt: skip
    a = ap.parse_args(argv)
    base = json.loads(Path(a.preset).read_text())
    axes = [parse_axis(s) for s in a.grid]
    for key, vals in axes:  # a wrong key fails here, before any simulation
        apply(copy.deepcopy(base), key, vals[0])
        if key.startswith("sim.") and any(c.startswith(f"{key}=") for c in common):
            raise SystemExit(
                f"--grid {key}: also set after -- (--set {key}=...), which overrides it"
            )
    real = []
    for spec in a.real:
        head, _, last = spec.rpartition(":")
        options = last.split(",") if "=" in last else []
        parts = (head if options else spec).rsplit(":", 2)
        if (
            len(parts) != 3
            or not parts[2].isdigit()
            or not all(k and v for k, _, v in (o.partition("=") for o in options))
        ):
            raise SystemExit(f"--real {spec!r}: write CSV:NAME:TRAIN_PROMPTS[:KEY=VALUE,...]")
        want = level_curves(Path(parts[0]), parts[1])
        if a.from_start and (no_start := sorted(lv for lv, by in want.items() if 0.0 not in by)):
            raise SystemExit(
                f"--from-start: {spec} has no evaluation at cum_rollouts 0 for {no_start}"
            )
        real.append((int(parts[2]), tuple(options), want, parts[1]))
    index = {name: r for r, (_, _, _, name) in enumerate(real)}  # a set's position by its name
    if a.gap and len(index) != len(real):
        raise SystemExit(f"--gap: two --real sets have one NAME ({[r[3] for r in real]})")
    gaps = {}
    for spec in a.gap:
        name, eq, other = spec.partition("=")
        if not eq or name not in index or other not in index or name == other:
            raise SystemExit(
                f"--gap {spec!r}: write NAME=BASE, two different NAMEs of --real sets "
                f"({sorted(index)})"
            )
        if name in gaps:
            raise SystemExit(f"--gap {spec!r}: {name} already has a base ({gaps[name]})")
        gaps[name] = other
    if chained := sorted(set(gaps) & set(gaps.values())):
        raise SystemExit(f"--gap: {chained} both measured from a base and a base: not supported")
    if unknown := sorted(set(a.real_base_scored) - set(gaps.values())):
        raise SystemExit(f"--score-base {unknown}: not the base of any --gap")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for c, combo in enumerate(itertools.product(*[v for _, v in axes])):
            preset = copy.deepcopy(base)
            for (key, _), v in zip(axes, combo):
                apply(preset, key, v)
            loss, per, matched = 0.0, {}, 0
            got = [  # each set's simulated curves, in --real's order
                level_curves(
                    simulate(preset, tp, a.seeds, common, Path(tmp) / f"{c}-{r}", options), "grpo"
                )
                for r, (tp, options, _, _) in enumerate(real)
            ]
            for r, (_, options, want, name) in enumerate(real):
                if name in gaps.values() and name not in a.real_base_scored:
                    continue  # a gap's base: its warm start's levels are not the preset's
                key = name + (f":{','.join(options)}" if options else "")
                sim = got[r]
                if name in gaps:  # scored as its difference from another set, on each side
                    other = gaps[name]
                    sim = difference(sim, got[index[other]])
                    want = difference(want, real[index[other]][2])
                part, beyond_start, before = 0.0, 0, matched
                for lv, by in want.items():
                    for x, y in by.items():
                        if lv in sim and x in sim[lv]:
                            beyond_start += x > 0
                            d = sim[lv][x] - y
                            if a.from_start:
                                if 0.0 not in sim[lv]:  # the real side's: checked above
                                    raise SystemExit(
                                        f"--from-start: the simulated level {lv} has no "
                                        "evaluation at cum_rollouts 0"
                                    )
                                d -= sim[lv][0.0] - by[0.0]
                            part += d**2
                            matched += 1
                if matched == before:  # nothing of this set was scored
                    raise SystemExit(
                        f"--real {a.real[r]}: no (level, cum_rollouts) point of the real curves is "
                        "in the simulated ones: check the levels' names and --eval-every-rollouts "
                        "against the real evaluations"
                    )
                if not beyond_start:  # e.g. real small steps scored against plain simulated GRPO
                    raise SystemExit(
                        f"--real {a.real[r]}: no evaluation after the start is at the simulated "
                        "cum_rollouts (check --eval-every-rollouts and GRPO's options against the "
                        "real runs')"
                    )
                per[key] = per.get(key, 0.0) + part  # two sets of one name: summed
                loss += part
            if matched == 0:
                raise SystemExit(
                    "no (level, cum_rollouts) point of the real curves is in the simulated ones: "
                    "check the levels' names and --eval-every-rollouts against the real evaluations"
                )
            if rows and matched != rows[0]["matched"]:  # every candidate scored on the same points
                raise SystemExit(
                    f"candidate {c} matched {matched} points, the first {rows[0]['matched']}"
                )
            point = dict(zip([k for k, _ in axes], combo))
            rows.append({"point": point, "loss": loss, "by_real_set": per, "matched": matched})
            print(f"{json.dumps(point)}  loss {loss:.4f}  " + "  ".join(
                f"{k} {v:.4f}" for k, v in per.items()), flush=True)  # fmt: skip
    rows.sort(key=lambda r: r["loss"])
    best = rows[0]
    print(f"best: {json.dumps(best['point'])} loss {best['loss']:.4f}")
    if a.table:
        Path(a.table).write_text(json.dumps(rows, indent=1))
    if a.out:
        preset = copy.deepcopy(base)
        for key, v in best["point"].items():
            apply(preset, key, v)
        what = "gain over the start" if a.from_start else "held-out"
        preset["source"] = (
            f"{base.get('name', a.preset)} with {json.dumps(best['point'])}: the lowest per-level "
            f"{what} loss ({best['loss']:.4f}) of benchmarks/fit_level_grid.py on GRPO alone "
            f"({', '.join(a.real)}"
            + "".join(f"; {k} scored as its gap from {v}" for k, v in gaps.items())
            + f"; simulated seeds {a.seeds})"
        )
        Path(a.out).write_text(json.dumps(preset, indent=2) + "\n")
        print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
