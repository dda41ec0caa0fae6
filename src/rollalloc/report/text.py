"""Plain-text cells of a summary's numbers with their intervals, for every table that prints them
(report.html, `rollalloc simulate` / `report`, benchmarks/summary_table.py).

Every function reads a summary dict of schema /2 and falls back to the bare number for a /1 summary
(no interval keys). In an interval a null end is +inf: "never" for rollouts, "inf" for a speedup.
"""

from __future__ import annotations

from typing import Any

WITHIN_NOISE = "within noise"


def _n(v: Any, spec: str, inf: str) -> str:
    return inf if v is None else format(v, spec)


def interval_text(ci: list[Any] | None, spec: str = ".2f", inf: str = "inf") -> str:
    """'[1.20, 1.90]'; '' without an interval."""
    if not ci:
        return ""
    return f"[{_n(ci[0], spec, inf)}, {_n(ci[1], spec, inf)}]"


def _level(summary: dict[str, Any]) -> str:
    return f"{(summary.get('bootstrap') or {}).get('level', 0.9):.0%}"


def speedup_text(summary: dict[str, Any], a: str, b: str, *, verdict: bool = True) -> str:
    """'1.52x [1.20, 1.90] faster' (speedup of a over b, its interval and verdict); 'n/a' when the
    point value is null and there is no interval."""
    v = (summary.get("speedup") or {}).get(a, {}).get(b)
    ci = (summary.get("speedup_ci") or {}).get(a, {}).get(b)
    vd = (summary.get("speedup_verdict") or {}).get(a, {}).get(b)
    out = "n/a" if v is None else f"{v:.2f}x"
    if ci:
        out += " " + interval_text(ci, ".2f")
    if verdict and vd:
        out += f" {vd}"
    return out


def to_target_text(summary: dict[str, Any], s: str) -> str:
    """'15,597 [15,460, 15,738]' rollouts to target with its interval; 'never' / 'at start' /
    'no baseline gain' for a null value."""
    st = summary["strategies"][s]
    v = st.get("rollouts_to_target")
    status = st.get("to_target_status")
    if v is not None:
        out = f"{v:,.0f}"
    else:
        out = {"at_start": "at start", "no_baseline_gain": "no baseline gain"}.get(status, "never")
    ci = st.get("rollouts_to_target_ci")
    if ci:
        out += " " + interval_text(ci, ",.0f", "never")
    return out


def final_text(summary: dict[str, Any], s: str, digits: int = 4) -> str:
    """'0.5700 [0.5600, 0.5800]' final accuracy at equal budget with its interval."""
    st = summary["strategies"][s]
    v = st.get("final_accuracy")
    out = "n/a" if v is None else f"{v:.{digits}f}"
    ci = st.get("final_accuracy_ci")
    if ci:
        out += " " + interval_text(ci, f".{digits}f")
    return out


def final_diff_text(summary: dict[str, Any], s: str, digits: int = 4) -> str:
    """'+0.0351 [+0.0339, +0.0363] higher': final accuracy minus the baseline's, interval, verdict;
    '' for the baseline itself or a /1 summary."""
    d = (summary.get("vs_baseline") or {}).get(s)
    if not d:
        return ""
    v = d.get("final_accuracy_diff")
    out = "n/a" if v is None else f"{v:+.{digits}f}"
    if d.get("final_accuracy_diff_ci"):
        out += " " + interval_text(d["final_accuracy_diff_ci"], f"+.{digits}f")
    if d.get("final_accuracy_verdict"):
        out += " " + d["final_accuracy_verdict"]
    return out


def level_text(summary: dict[str, Any], level: str, s: str, digits: int = 4) -> tuple[str, str]:
    """('+0.1320 [+0.1250, +0.1390]', '-0.0210 [-0.0360, -0.0060] lower'): s's held-out gain on
    `level` by the end and its difference from the baseline's with the verdict ('' for the
    baseline); ('n/a', '') where the summary has no such level or strategy."""
    cell = ((summary.get("levels") or {}).get(level) or {}).get(s)
    if not cell:
        return "n/a", ""

    def num(v: Any) -> str:
        return "n/a" if v is None else f"{v:+.{digits}f}"

    gain = f"{num(cell.get('gain'))} " + interval_text(cell.get("gain_ci"), f"+.{digits}f")
    if "diff" not in cell:
        return gain.strip(), ""
    diff = f"{num(cell['diff'])} " + interval_text(cell.get("diff_ci"), f"+.{digits}f")
    return gain.strip(), f"{diff.strip()} {cell.get('diff_verdict', '')}".strip()


def baseline_gain_text(summary: dict[str, Any]) -> str:
    """'baseline grpo gained +0.2551 [+0.2545, +0.2556] (90% interval) by the end'; '' for /1."""
    g = summary.get("baseline_gain")
    if not g:
        return ""
    base = summary["target"]["baseline"]
    v = g.get("final")
    out = f"baseline {base} gained {'n/a' if v is None else f'{v:+.4f}'}"
    if g.get("final_ci"):
        out += " " + interval_text(g["final_ci"], "+.4f")
    out += f" ({_level(summary)} interval) over the initial accuracy by the end"
    if g.get("peak") is not None:
        out += f", {g['peak']:+.4f} at its peak"
    return out


def warnings_text(summary: dict[str, Any]) -> list[str]:
    """The summary's warnings, each as one line starting with 'WARNING: ' (empty for /1)."""
    return [f"WARNING: {w}" for w in summary.get("warnings") or []]


def print_intervals(summary: dict[str, Any], console: Any) -> None:
    """Print (rich) a compact table of every strategy's rollouts to target, speedup over the
    baseline and final-accuracy difference from it, each with its interval and verdict, then the
    summary's warnings in bold red. Nothing but the warnings for a /1 summary."""
    from rich.markup import escape
    from rich.table import Table

    if summary.get("bootstrap"):
        base = summary["target"]["baseline"]
        boot = summary["bootstrap"]
        table = Table(
            title=f"{_level(summary)} bootstrap intervals over seeds ({boot['resamples']} "
            "resamples; rollouts to target interpolated between evaluations)"
        )
        for h in (
            "strategy",
            "rollouts to target [interval]",
            f"speedup vs {base} [interval]",
            f"final acc - {base} [interval]",
        ):
            table.add_column(escape(h), justify="right")
        for s in summary["strategies"]:
            table.add_row(
                escape(s),
                escape(to_target_text(summary, s)),
                "-" if s == base else escape(speedup_text(summary, s, base)),
                "-" if s == base else escape(final_diff_text(summary, s)),
            )
        console.print(table)
        gain = baseline_gain_text(summary)
        if gain:
            console.print(escape(gain), highlight=False)
    for w in warnings_text(summary):
        console.print(f"[bold red]{escape(w)}[/bold red]", highlight=False)
