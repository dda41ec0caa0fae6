"""Reports of comparisons: summary.json, curves.csv, steps.jsonl, plots and a self-contained HTML page.

    write_report(out_dir, *, kind, task, seeds, budget_rollouts, runs, strategy_configs,
                 baseline="grpo", fraction=0.9, extra=None) -> summary dict
    rebuild_report(out_dir) -> summary dict        (`rollalloc report DIR`)

The computation of BENCHMARKS.md (rollouts to target, speedups) is in `rollalloc.report.curves`.
"""

from rollalloc.report.writer import read_runs, rebuild_report, write_report

__all__ = ["read_runs", "rebuild_report", "write_report"]
