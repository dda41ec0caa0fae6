"""PNG plots of a comparison (matplotlib, Agg backend; imported only when a report is written)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from rollalloc.report.summary import Curves, Runs


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _colors(strategies: list[str]) -> dict[str, Any]:
    plt = _plt()
    cmap = plt.get_cmap("tab10")
    return {s: cmap(i % 10) for i, s in enumerate(strategies)}


LINESTYLES = ("-", "--", "-.", ":")


def _styles(strategies: list[str]) -> dict[str, str]:
    """A line style per strategy, so that curves lying on top of each other stay visible."""
    return {s: LINESTYLES[i % len(LINESTYLES)] for i, s in enumerate(strategies)}


def _step_mean(runs_of: dict[int, dict[str, Any]], key: str) -> np.ndarray:
    """Seed-mean of a per-step value, by step index, over the seeds that reached that step: (T,)."""
    series = [np.array([float(st[key]) for st in r.get("steps", [])]) for r in runs_of.values()]
    t = max((len(x) for x in series), default=0)
    mat = np.full((len(series), t), np.nan)
    for i, x in enumerate(series):
        mat[i, : len(x)] = x
    with np.errstate(invalid="ignore"):
        return np.nanmean(mat, axis=0) if t else np.zeros(0)


def _smooth(y: np.ndarray, w: int) -> np.ndarray:
    if len(y) < w or w <= 1:
        return y
    k = np.ones(w) / w
    return np.convolve(np.pad(y, (w - 1, 0), mode="edge"), k, mode="valid")


def accuracy_plot(
    path: Path, runs: Runs, cv: Curves, summary: dict[str, Any], axis: str = "rollouts"
) -> None:
    """Held-out accuracy vs cumulative rollouts (or tokens): smoothed seed mean, seeds thin, target."""
    plt = _plt()
    key = {"rollouts": "cum_rollouts", "tokens": "cum_tokens"}[axis]
    colors, styles = _colors(list(runs)), _styles(list(runs))
    fig, ax = plt.subplots(figsize=(8, 5))
    for s, by_seed in runs.items():
        for r in by_seed.values():
            x = [e[key] for e in r["evals"]]
            ax.plot(x, [e["accuracy"] for e in r["evals"]], color=colors[s], alpha=0.2, lw=0.8)
        ax.plot(cv.grid[axis], cv.mean[axis][s], color=colors[s], ls=styles[s], lw=2, label=s)
    t = summary["target"]
    ax.axhline(
        t["value"],
        color="k",
        ls="--",
        lw=1,
        label=f"target ({t['fraction']:g} of {t['baseline']} gain)",
    )
    ax.axhline(summary["initial_accuracy"], color="grey", ls=":", lw=1)
    if axis == "rollouts":
        hi_x = float(cv.grid[axis][-1])
        for i, (s, st) in enumerate(summary["strategies"].items()):
            ci = st.get("rollouts_to_target_ci")
            y = t["value"] + (i - (len(runs) - 1) / 2) * 0.002  # side by side, not on top
            if ci and ci[0] is not None:  # the interval of the crossing (null end: never)
                end = hi_x if ci[1] is None else ci[1]
                ax.plot(
                    [ci[0], end], [y, y], color=colors[s], lw=3, alpha=0.5, solid_capstyle="butt"
                )
                if ci[1] is None:
                    ax.plot([end], [y], ">", color=colors[s], alpha=0.5)
            if st["rollouts_to_target"] is not None:
                ax.plot([st["rollouts_to_target"]], [y], "o", color=colors[s])
    ax.set_xlabel(f"cumulative {axis} (all phases, discarded included)")
    ax.set_ylabel("held-out accuracy")
    ax.set_title(
        f"{summary['task']}: accuracy vs {axis} (mean of seeds {summary['seeds']}, 3-point MA)"
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def step_plot(path: Path, runs: Runs, key: str, ylabel: str, title: str) -> None:
    """A per-step statistic vs step: seed mean (thin) and its 10-step moving average (bold)."""
    plt = _plt()
    colors, styles = _colors(list(runs)), _styles(list(runs))
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for s, by_seed in runs.items():
        y = _step_mean(by_seed, key)
        x = np.arange(1, len(y) + 1)
        ax.plot(x, y, color=colors[s], alpha=0.25, lw=0.7)
        ax.plot(x, _smooth(y, 10), color=colors[s], ls=styles[s], lw=1.8, label=s)
    ax.set_xlabel("training step")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def phase_plot(path: Path, summary: dict[str, Any]) -> None:
    """Seed-mean total rollouts by phase per strategy (stacked), discarded ones hatched on top."""
    plt = _plt()
    strategies = list(summary["strategies"])
    phases = sorted({ph for st in summary["strategies"].values() for ph in st["rollouts_by_phase"]})
    cmap = plt.get_cmap("Set2")
    fig, ax = plt.subplots(figsize=(8, 4.5))
    bottom = np.zeros(len(strategies))
    for i, ph in enumerate(phases):
        v = np.array(
            [float(summary["strategies"][s]["rollouts_by_phase"].get(ph) or 0) for s in strategies]
        )
        ax.bar(strategies, v, bottom=bottom, color=cmap(i % 8), label=ph)
        bottom += v
    disc = np.array(
        [float(summary["strategies"][s]["discarded_rollouts"] or 0) for s in strategies]
    )
    ax.bar(  # over the top of each stack: the share of the spend that was never trained
        strategies,
        disc,
        bottom=bottom - disc,
        fill=False,
        hatch="//",
        edgecolor="k",
        label="of which discarded (untrained)",
    )
    ax.set_ylabel("rollouts (mean over seeds)")
    ax.set_title("rollouts by phase")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _bar(ax, i: int, point: float | None, ci: list[Any] | None, inf: float, color: Any) -> None:
    """A point and its interval on row i; an end of +inf (null) is drawn at `inf` with an arrow."""
    if ci and ci[0] is not None:
        hi = inf if ci[1] is None else ci[1]
        ax.plot([ci[0], hi], [i, i], color=color, lw=3, alpha=0.6, solid_capstyle="butt")
        if ci[1] is None:
            ax.plot([hi], [i], ">", color=color)
    if point is not None:
        ax.plot([point], [i], "o", color=color)


def intervals_plot(path: Path, summary: dict[str, Any]) -> bool:
    """Speedup over the baseline and final-accuracy difference from it, each strategy with its
    bootstrap interval and verdict. False (nothing written) for a summary without intervals."""
    vs = summary.get("vs_baseline") or {}
    if not vs:
        return False
    plt = _plt()
    names = list(vs)
    colors = _colors(list(summary["strategies"]))
    base = summary["target"]["baseline"]
    level = f"{(summary.get('bootstrap') or {}).get('level', 0.9):.0%}"
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 0.6 * len(names) + 1.8), sharey=True)
    finite = [
        v
        for d in vs.values()
        for v in [d.get("speedup"), *(d.get("speedup_ci") or [])]
        if v is not None
    ]
    inf = max([1.0, *finite]) * 1.3
    for i, s in enumerate(names):
        d = vs[s]
        _bar(a1, i, d.get("speedup"), d.get("speedup_ci"), inf, colors[s])
        a1.annotate(
            d.get("speedup_verdict", ""),
            (1.0, i),
            xytext=(4, 6),
            textcoords="offset points",
            fontsize=8,
        )
        _bar(a2, i, d.get("final_accuracy_diff"), d.get("final_accuracy_diff_ci"), 0.0, colors[s])
        a2.annotate(
            d.get("final_accuracy_verdict", ""),
            (0.0, i),
            xytext=(4, 6),
            textcoords="offset points",
            fontsize=8,
        )
    a1.axvline(1.0, color="k", ls="--", lw=1)
    a2.axvline(0.0, color="k", ls="--", lw=1)
    a1.set_yticks(range(len(names)), names)
    a1.set_ylim(-0.7, len(names) - 0.3)
    a1.set_xlabel(f"speedup over {base} (rollouts to target) [{level} interval]")
    a2.set_xlabel(f"final accuracy minus {base}'s [{level} interval]")
    for ax in (a1, a2):
        ax.grid(alpha=0.3, axis="x")
    fig.suptitle(f"{summary['task']}: comparisons with {base}, bootstrap over seeds", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def write_plots(out_dir: Path, runs: Runs, cv: Curves, summary: dict[str, Any]) -> list[str]:
    """Write every plot; returns their file names in report order."""
    names = []
    if intervals_plot(out_dir / "intervals_vs_baseline.png", summary):
        names.append("intervals_vs_baseline.png")
    accuracy_plot(out_dir / "accuracy_vs_rollouts.png", runs, cv, summary, "rollouts")
    names.append("accuracy_vs_rollouts.png")
    if cv.grid.get("tokens") is not None:
        accuracy_plot(out_dir / "accuracy_vs_tokens.png", runs, cv, summary, "tokens")
        names.append("accuracy_vs_tokens.png")
    step_plot(
        out_dir / "effective_prompt_ratio.png",
        runs,
        "effective_prompt_ratio",
        "effective prompt ratio",
        "share of trained groups with non-identical rewards",
    )
    step_plot(
        out_dir / "group_reward_variance.png",
        runs,
        "mean_group_reward_var",
        "mean within-group reward variance",
        "mean within-group reward variance of trained groups",
    )
    phase_plot(out_dir / "rollouts_by_phase.png", summary)
    names += ["effective_prompt_ratio.png", "group_reward_variance.png", "rollouts_by_phase.png"]
    return names
