"""Write (and rebuild) a comparison report: summary.json, curves.csv, steps.jsonl, PNGs, report.html.

Shared by every comparison command (`rollalloc simulate`, `rollalloc compare`): they hand over the
records of `rollalloc.loop.run` per strategy and seed, this module does the rest (BENCHMARKS.md).
"""

from __future__ import annotations

import base64
import csv
import html
import json
import logging
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from rollalloc.report import bootstrap as bs
from rollalloc.report.summary import READ_SCHEMAS, ReportInputs, Runs, build_summary

log = logging.getLogger("rollalloc.report")

CURVE_COLUMNS = [
    "strategy",
    "seed",
    "eval_point",
    "step",
    "cum_rollouts",
    "cum_tokens",
    "wall_s",
    "accuracy",
]


def _jsonable(obj: Any) -> Any:
    """Numpy scalars/arrays to Python, non-finite floats to None (strict JSON)."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [_jsonable(v) for v in obj.tolist()]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    return repr(obj)  # e.g. a callable in a config: shown, never re-executed


def write_curves_csv(path: Path, runs: Runs) -> None:
    extra = sorted(
        {key for by in runs.values() for r in by.values() for e in r["evals"] for key in e}
        - set(CURVE_COLUMNS)
    )
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CURVE_COLUMNS + extra)
        for s, by_seed in runs.items():
            for seed, r in by_seed.items():
                for k, e in enumerate(r["evals"]):
                    row = (
                        [s, seed, k]
                        + [e.get(c, "") for c in CURVE_COLUMNS[3:]]
                        + [e.get(c, "") for c in extra]
                    )
                    w.writerow(row)


def write_steps_jsonl(path: Path, runs: Runs) -> None:
    with open(path, "w") as f:
        for s, by_seed in runs.items():
            for seed, r in by_seed.items():
                for st in r.get("steps", []):
                    f.write(
                        json.dumps(_jsonable({"strategy": s, "seed": seed, **st}), allow_nan=False)
                        + "\n"
                    )


def read_runs(out_dir: str | Path) -> Runs:
    """The runs of a report directory, from curves.csv and steps.jsonl."""
    out = Path(out_dir)
    runs: Runs = {}
    curves_path = out / "curves.csv"
    if not curves_path.is_file():
        raise FileNotFoundError(f"{curves_path} does not exist: not a report directory")
    with open(curves_path, newline="") as f:
        reader = csv.DictReader(f)
        for row in reader:
            try:
                s, seed = row.pop("strategy"), int(row.pop("seed"))
                row.pop("eval_point")
                rec = {
                    k: (int(float(v)) if k in ("step", "cum_rollouts", "cum_tokens") else float(v))
                    for k, v in row.items()
                    if v != ""
                }
            except (KeyError, TypeError, ValueError) as e:
                raise ValueError(
                    f"{curves_path}: line {reader.line_num}: not a curves row ({e})"
                ) from None
            runs.setdefault(s, {}).setdefault(seed, {"evals": [], "steps": []})["evals"].append(rec)
    steps_path = out / "steps.jsonl"
    if steps_path.is_file():
        with open(steps_path) as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    st = json.loads(line)
                    s, seed = st.pop("strategy"), int(st.pop("seed"))
                except json.JSONDecodeError as e:
                    raise ValueError(f"{steps_path}: line {n}: not JSON ({e.msg})") from None
                except (AttributeError, KeyError, TypeError, ValueError) as e:
                    raise ValueError(
                        f"{steps_path}: line {n}: not a step record (no strategy/seed: {e})"
                    ) from None
                runs.setdefault(s, {}).setdefault(seed, {"evals": [], "steps": []})["steps"].append(
                    st
                )
    return runs


def _fmt(v: Any, kind: str = "") -> str:
    if v is None:
        return "n/a" if kind == "x" else "never"
    if isinstance(v, float) and kind == "x":
        return f"{v:.2f}x"
    if isinstance(v, float) and kind == "acc":
        return f"{v:.4f}"
    if isinstance(v, (int, float)) and kind == "n":
        return f"{v:,.0f}"
    if isinstance(v, float):
        return f"{v:.3g}"
    return html.escape(str(v))


_VERDICT_CLASS = {
    "within noise": "noise",
    "faster": "faster",
    "slower": "slower",
    "higher": "higher",
    "lower": "lower",
    "undefined": "noise",
}


def _verdict_html(cell: str) -> str:
    """An escaped table cell whose trailing verdict ('within noise', 'faster', ...) is labelled."""
    for v, cls in _VERDICT_CLASS.items():
        if cell.endswith(" " + v):
            head = cell[: -len(v) - 1]
            return f'{html.escape(head)} <span class="{cls}">{html.escape(v)}</span>'
    return html.escape(cell)


def render_html(summary: dict[str, Any], images: dict[str, bytes]) -> str:
    """A self-contained HTML page: tables, base64 plots, every strategy's config."""
    e = html.escape
    t = summary["target"]
    from rollalloc.report import text
    from rollalloc.report.summary import spent_vs_budget

    base = t["baseline"]

    strategies = list(summary["strategies"])
    level = f"{(summary.get('bootstrap') or {}).get('level', 0.9):.0%}"
    oracle = "oracle" in strategies  # the "vs oracle" column only when the oracle ran
    rows = []
    for s in strategies:
        st = summary["strategies"][s]
        rows.append(
            "<tr>"
            + "".join(
                f"<td>{c}</td>"
                for c in [
                    e(s),
                    str(len(st["per_seed_rollouts_to_target"])),
                    e(text.to_target_text(summary, s)),
                    ", ".join(_fmt(v, "n") for v in st["per_seed_rollouts_to_target"]),
                    _fmt(st["tokens_to_target"], "n"),
                    _fmt(st["wall_s_to_target"]),
                    *([_fmt(st.get("ratio_to_oracle"), "x")] if oracle else []),
                    e(text.final_text(summary, s)),
                    _verdict_html(text.final_diff_text(summary, s)) if s != base else "-",
                    _fmt(st["peak_accuracy"], "acc"),
                    _fmt(st["mean_effective_prompt_ratio"], "acc"),
                    e(spent_vs_budget(st["total_rollouts"], summary.get("budget_rollouts"))),
                ]
            )
            + "</tr>"
        )
    head = [
        "strategy",
        "seeds",
        f"rollouts to target [{level} interval]",
        "per seed",
        "tokens to target",
        "wall s to target",
        *(["vs oracle (rollouts ratio)"] if oracle else []),
        f"final acc [{level} interval]",
        f"final acc &minus; {e(base)}",
        "peak acc",
        "eff. prompt ratio",
        "rollouts spent (of budget)",
    ]
    sp_head = "<tr><th>A \\ B</th>" + "".join(f"<th>{e(b)}</th>" for b in strategies) + "</tr>"
    sp_rows = []
    for a in strategies:
        cells = "".join(
            "<td>-</td>"
            if a == b
            else f"<td>{_verdict_html(text.speedup_text(summary, a, b))}</td>"
            for b in strategies
        )
        sp_rows.append(f"<tr><th>{e(a)}</th>{cells}</tr>")
    ta_rows = []
    for f, d in summary["targets_at"].items():
        cells = "".join(f"<td>{_fmt(d['rollouts_to_target'].get(s), 'n')}</td>" for s in strategies)
        ta_rows.append(f"<tr><th>{e(f)}</th><td>{d['value']:.4f}</td>{cells}</tr>")
    lv_rows = []
    for lv in summary.get("levels") or {}:
        cells = []
        for s in strategies:
            gain, diff = text.level_text(summary, lv, s)
            cells.append(
                f"<td>{e(gain)}" + (f"<br>{_verdict_html(diff)}" if diff else "") + "</td>"
            )
        lv_rows.append(f"<tr><th>{e(lv)}</th>{''.join(cells)}</tr>")
    levels_html = (
        f"<h2>Held-out gain per level by the end [{level} interval]; second line: minus "
        f"{e(base)}'s, verdict</h2><p>A speedup to the overall target can come with a level "
        "taught less (summary.json <code>levels</code>).</p><table><tr><th>level</th>"
        + "".join(f"<th>{e(s)}</th>" for s in strategies)
        + f"</tr>{''.join(lv_rows)}</table>"
        if lv_rows
        else ""
    )
    imgs = "".join(
        f'<figure><img alt="{e(n)}" src="data:image/png;base64,{base64.b64encode(b).decode()}"/>'
        f"<figcaption>{e(n)}</figcaption></figure>"
        for n, b in images.items()
    )
    configs = "".join(
        f"<h3>{e(s)}</h3><pre>{e(json.dumps(c, indent=2, sort_keys=True))}</pre>"
        for s, c in summary.get("strategy_configs", {}).items()
    )
    extra = summary.get("extra") or {}
    warns = summary.get("warnings") or []
    warn_box = (
        '<div class="warn"><strong>WARNING</strong><ul>'
        + "".join(f"<li>{e(w)}</li>" for w in warns)
        + "</ul></div>"
        if warns
        else ""
    )
    boot = summary.get("bootstrap")
    if boot:
        method = (
            f"<p>Intervals: {level} bootstrap percentile intervals over seeds ({boot['resamples']} "
            f"resamples, RNG seed {boot['seed']}; each strategy's seeds are drawn with replacement, "
            "independently of the other strategies; the curves, the target and the crossing are "
            "recomputed in every resample). A comparison whose interval contains 1 (speedup) or 0 "
            "(accuracy difference) is <em>within noise</em>. Rollouts to target are interpolated "
            "between evaluations. " + e(text.baseline_gain_text(summary)) + ".</p>"
        )
    else:
        method = "<p>Schema /1 summary: no intervals were computed.</p>"
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>rollalloc {e(summary["kind"])}: {e(summary["task"])}</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}}
table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}
th{{background:#f4f4f4}}pre{{background:#f7f7f7;padding:8px;overflow-x:auto;font-size:12px}}
img{{max-width:100%}}figure{{margin:1em 0}}
.warn{{background:#fde2e1;border:2px solid #c0392b;color:#7b241c;padding:8px 12px;margin:1em 0}}
.noise{{color:#888;font-style:italic}}.faster,.higher{{color:#1e7b34}}.slower,.lower{{color:#b03a2e}}
</style></head><body>
<h1>rollalloc {e(summary["kind"])}: {e(summary["task"])}</h1>
{warn_box}
<p>seeds {e(str(summary["seeds"]))}, budget {_fmt(summary["budget_rollouts"], "n")} rollouts.
Initial accuracy {summary["initial_accuracy"]:.4f}; target {t["value"]:.4f} = initial +
{t["fraction"]:g} &times; (peak of {e(t["baseline"])} &minus; initial). Curves are seed means on a common
grid, trailing moving average over 3 evaluation points; every generated rollout counts
(pilot, commit, discarded).</p>
{method}
<h2>Rollouts to target</h2>
<table><tr>{"".join(f"<th>{h}</th>" for h in head)}</tr>{"".join(rows)}</table>
<h2>Speedup (rollouts to target of B / of A; larger is better for A) [{level} interval] verdict</h2>
<table>{sp_head}{"".join(sp_rows)}</table>
<h2>Rollouts to other targets</h2>
<table><tr><th>fraction</th><th>target</th>{"".join(f"<th>{e(s)}</th>" for s in strategies)}</tr>{"".join(ta_rows)}</table>
{levels_html}
<h2>Plots</h2>{imgs}
<h2>Configuration of every strategy</h2>{configs}
<h2>Run details</h2><pre>{e(json.dumps(extra, indent=2, sort_keys=True))}</pre>
</body></html>
"""


def write_report(
    out_dir: str | Path, inputs: ReportInputs | None = None, /, **fields: Any
) -> dict[str, Any]:
    """Write summary.json, curves.csv, steps.jsonl, the PNG plots and report.html into `out_dir`.

    What the report is computed from is one `ReportInputs`, given as it is or as its fields
    (`write_report(out, kind=..., task=..., seeds=..., budget_rollouts=..., runs=...,
    strategy_configs=..., baseline=..., fraction=..., extra=..., bootstrap_resamples=...,
    bootstrap_seed=..., level=...)`). `runs[strategy][seed] = {"evals": [...], "steps": [...]}`
    holds the records of `rollalloc.loop.run`. Returns the summary dict (schema
    rollalloc.summary/2, BENCHMARKS.md), with bootstrap intervals over seeds
    (`bootstrap_resamples` resamples, RNG seed `bootstrap_seed`, `level` 0.9). Its `warnings` list
    (e.g. a baseline that did not learn beyond noise) is also logged on the "rollalloc.report"
    logger and shown at the top of report.html; a CLI should print it
    (`rollalloc.report.warnings_text`).
    """
    from rollalloc.report.plots import write_plots

    if inputs is None:
        inputs = ReportInputs(**fields)
    elif fields:
        raise TypeError("write_report: give a ReportInputs or its fields, not both")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    runs = {s: {int(k): v for k, v in by.items()} for s, by in inputs.runs.items()}
    summary, cv = build_summary(
        replace(
            inputs,
            runs=runs,
            strategy_configs=_jsonable(inputs.strategy_configs),
            extra=_jsonable(inputs.extra or {}),
        )
    )
    summary = _jsonable(summary)
    for w in summary["warnings"]:
        log.warning("%s: %s", out, w)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, allow_nan=False) + "\n")
    write_curves_csv(out / "curves.csv", runs)
    write_steps_jsonl(out / "steps.jsonl", runs)
    names = write_plots(out, runs, cv, summary)
    images = {n: (out / n).read_bytes() for n in names}
    (out / "report.html").write_text(render_html(summary, images))
    return summary


def load_summary(path: str | Path) -> dict[str, Any]:
    """summary.json of a report directory (or the file itself), schema rollalloc.summary/1 or /2;
    ValueError naming the file and the problem otherwise. A /1 summary is returned as it is (no
    interval keys: read them with .get)."""
    p = Path(path)
    meta_path = p / "summary.json" if p.is_dir() or not p.suffix else p
    if not meta_path.is_file():
        raise FileNotFoundError(f"{meta_path} does not exist: not a report directory")
    try:
        meta = json.loads(meta_path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{meta_path}: line {e.lineno}: not JSON ({e.msg})") from None
    except UnicodeDecodeError as e:
        raise ValueError(f"{meta_path}: not UTF-8 text ({e.reason})") from None
    if not isinstance(meta, dict) or meta.get("schema") not in READ_SCHEMAS:
        schema = meta.get("schema") if isinstance(meta, dict) else None
        expected = " or ".join(repr(x) for x in READ_SCHEMAS)
        raise ValueError(f"{meta_path}: schema is {schema!r}, expected {expected}")
    return meta


def rebuild_report(out_dir: str | Path) -> dict[str, Any]:
    """Recompute summary, plots and HTML of a report directory from its curves.csv and steps.jsonl
    (kind, task, seeds, budget, configs, target fraction and baseline are read from summary.json,
    schema /1 or /2; the bootstrap settings of a /2 summary are kept). Writes schema /2."""
    out = Path(out_dir)
    meta = load_summary(out / "summary.json")
    meta_path = out / "summary.json"
    try:
        args = {
            "kind": meta["kind"],
            "task": meta["task"],
            "seeds": meta["seeds"],
            "budget_rollouts": meta["budget_rollouts"],
            "baseline": meta["target"]["baseline"],
            "fraction": meta["target"]["fraction"],
        }  # the fields of ReportInputs that summary.json records
    except (KeyError, TypeError) as e:
        raise ValueError(f"{meta_path}: key {e} missing") from None
    boot = meta.get("bootstrap") or {}
    if not isinstance(boot, dict):
        raise ValueError(f"{meta_path}: key 'bootstrap' is not a mapping")
    try:
        args |= {
            "bootstrap_resamples": int(boot.get("resamples", bs.DEFAULT_RESAMPLES)),
            "bootstrap_seed": int(boot.get("seed", bs.DEFAULT_SEED)),
            "level": float(boot.get("level", bs.DEFAULT_LEVEL)),
        }
    except (TypeError, ValueError) as e:
        raise ValueError(f"{meta_path}: key 'bootstrap' has a non-number ({e})") from None
    runs = read_runs(out)  # everything is read and checked before anything is written
    return write_report(
        out,
        ReportInputs(
            runs=runs,
            strategy_configs=meta.get("strategy_configs", {}),
            extra=meta.get("extra"),
            **args,
        ),
    )
