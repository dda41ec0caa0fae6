"""Put another warm start's pool into a fitted simulator preset: the learning model kept, the pool
replaced (docs/simulator.md, "Session 37: a preset for the disjoint warm start, and what the
model lacks there").

    python benchmarks/design_testbed.py --config C.yaml --levels --preset-out LEVELS.json
    python benchmarks/transplant_pool.py --model benchmarks/presets/testbed-default-s35-answers.json \
        --pool LEVELS.json --out P.json [--plasticity 2x1d=1]

Every `sim` field of --model (gains, optimiser, repeats, answer prior, fast component ...) and every
level's learning fields (plasticity, transfer rows, ceiling, learnable share) are kept; the pool
size and, level by level, the shares and the measured pool and held-out pass rates (and `distinct`)
come from --pool, a `design_testbed.py --levels` preset of the new warm start. --plasticity sets a
level's plasticity, e.g. 1 for a level the new warm start never trained on. Refit the gains to that
warm start's GRPO runs afterwards (`fit_testbed_preset.py fit --base-preset P.json`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

POOL_FIELDS = ("share", "eval_share", "pass_rate_histogram", "eval_pass_rate_histogram", "distinct")


def transplant(model: dict, pool: dict, plasticity: dict[str, float] | None = None) -> dict:
    """`model` with `pool`'s pool (both presets with levels, the same level names in order)."""
    for name, p in (("model", model), ("pool", pool)):
        if not p.get("levels"):
            raise ValueError(
                f"--{name}: a preset with levels is needed (design_testbed.py --levels)"
            )
    names = [lv["name"] for lv in model["levels"]]
    if names != [lv["name"] for lv in pool["levels"]]:
        raise ValueError(
            f"the presets' levels differ: model {names}, pool {[lv['name'] for lv in pool['levels']]}"
        )
    unknown = set(plasticity or {}) - set(names)
    if unknown:
        raise ValueError(f"--plasticity: no level {sorted(unknown)} (levels: {names})")
    out = json.loads(json.dumps(model))  # a deep copy
    out["num_prompts"] = pool["num_prompts"]
    if "pass_rate_histogram" in pool:
        out["pass_rate_histogram"] = pool["pass_rate_histogram"]
    else:
        out.pop("pass_rate_histogram", None)
    for lv, new in zip(out["levels"], pool["levels"]):
        for key in POOL_FIELDS:
            if key in new:
                lv[key] = new[key]
            else:
                lv.pop(key, None)
        if plasticity and lv["name"] in plasticity:
            lv["plasticity"] = float(plasticity[lv["name"]])
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--model", required=True, help="the fitted preset whose learning model is kept")
    ap.add_argument(
        "--pool", required=True, help="design_testbed.py --levels preset of the new pool"
    )
    ap.add_argument("--out", required=True, help="the new preset (JSON); never overwritten")
    ap.add_argument("--name", default=None, help="the new preset's name (default: --out's stem)")
    ap.add_argument(
        "--plasticity",
        action="append",
        default=[],
        metavar="LEVEL=VALUE",
        help="set a level's plasticity (repeatable), e.g. 2x1d=1 for a level the warm start never saw",
    )
    a = ap.parse_args(argv)
    plasticity = {}
    for item in a.plasticity:
        level, sep, value = item.partition("=")
        try:
            plasticity[level] = float(value) if sep else float("nan")
        except ValueError:
            plasticity[level] = float("nan")
        if not sep or not plasticity[level] >= 0:
            raise SystemExit(f"--plasticity {item!r}: expected LEVEL=VALUE with VALUE >= 0")
    out = Path(a.out)
    if out.exists():
        raise SystemExit(f"--out {out} exists; not overwritten")
    if not out.parent.is_dir():
        raise SystemExit(f"--out {out}: the folder {out.parent} does not exist")
    for flag, path in (("--model", a.model), ("--pool", a.pool)):
        if not Path(path).is_file():
            raise SystemExit(f"{flag} {path}: no such file")
    try:
        model, pool = json.loads(Path(a.model).read_text()), json.loads(Path(a.pool).read_text())
    except json.JSONDecodeError as e:
        raise SystemExit(f"--model / --pool: not JSON ({e})") from None
    try:
        preset = transplant(model, pool, plasticity)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    preset["name"] = a.name or out.stem
    preset["source"] = (
        f"benchmarks/transplant_pool.py --model {a.model} --pool {a.pool}"
        + "".join(f" --plasticity {p}" for p in a.plasticity)
        + f" (the model's source: {model.get('source', '?')})"
    )
    preset["description"] = (
        f"{pool.get('description', 'a measured pool')} With the learning model of "
        f"{model.get('name', a.model)}. " + model.get("description", "")
    )
    out.write_text(json.dumps(preset, indent=1) + "\n")
    print(
        f"wrote {out}: {pool['num_prompts']} prompts, learning model of {a.model}", file=sys.stderr
    )


if __name__ == "__main__":
    main()
