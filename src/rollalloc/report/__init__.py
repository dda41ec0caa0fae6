"""Reports of comparisons: summary.json, curves.csv, steps.jsonl, plots and a self-contained HTML page.

    write_report(out_dir, ReportInputs(kind, task, seeds, budget_rollouts, runs, strategy_configs,
                 baseline="grpo", fraction=0.9, extra=None,
                 bootstrap_resamples=2000, bootstrap_seed=0, level=0.9)) -> summary dict
                                                   (or the same fields as keywords)
    rebuild_report(out_dir) -> summary dict        (`rollalloc report DIR`; reads schema /1 and /2)
    load_summary(path) -> summary dict             (schema rollalloc.summary/1 or /2, checked)
    warnings_text(summary) -> ["WARNING: ...", ...] (what a CLI should print)

The computation of BENCHMARKS.md (rollouts to target interpolated between evaluations, speedups)
is in `rollalloc.report.curves`, the bootstrap intervals over seeds in `rollalloc.report.bootstrap`,
the text cells with intervals and verdicts in `rollalloc.report.text`, the seeds-by-precision rule of
`rollalloc compare --half-width` in `rollalloc.report.precision`.
"""

from rollalloc.report.summary import ReportInputs
from rollalloc.report.text import warnings_text
from rollalloc.report.writer import load_summary, read_runs, rebuild_report, write_report

__all__ = [
    "ReportInputs",
    "load_summary",
    "read_runs",
    "rebuild_report",
    "warnings_text",
    "write_report",
]
