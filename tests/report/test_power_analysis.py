"""benchmarks/power_analysis.py: the null comparison of a baseline against itself."""

from __future__ import annotations

import json

import numpy as np


def _write_runs(root, seeds, jitter, rng):
    """GRPO-like runs: accuracy rises linearly from 0.3 to 0.4 over 60k rollouts (then flat, to
    100k), stretched along the rollout axis by a seed's own factor (1 + jitter * z): its rollouts to
    any target vary by that share between seeds."""
    for s in seeds:
        d = root / "grpo" / f"seed{s}"
        d.mkdir(parents=True)
        scale = 1.0 + jitter * rng.standard_normal()
        xs = np.arange(0, 100_001, 4096)
        evals = [
            {
                "step": i,
                "cum_rollouts": int(x),
                "cum_tokens": int(x) * 3,
                "wall_s": float(i),
                "accuracy": 0.3 + 0.1 * min(x / (100_000 * scale), 1.0),
            }
            for i, x in enumerate(xs)
        ]
        steps = [
            {
                "step": i + 1,
                "cum_rollouts": int(x),
                "cum_tokens": int(x) * 3,
                "rollouts": 4096,
                "effective_prompt_ratio": 0.5,
                "mean_group_reward_var": 0.1,
            }
            for i, x in enumerate(xs[1:])
        ]
        (d / "evals.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evals))
        (d / "steps.jsonl").write_text("".join(json.dumps(e) + "\n" for e in steps))
        (d / "run.json").write_text("{}")


def _wide_and_narrow(pa, root, seed):
    """40 GRPO-like runs with a spread of 15% and 40 with 3% (seeded), loaded as the script does."""
    rng = np.random.default_rng(seed)
    _write_runs(root / "wide", range(40), 0.15, rng)
    _write_runs(root / "narrow", range(40), 0.03, rng)
    return (pa.load_seeds([str(root / name)], "grpo") for name in ("wide", "narrow"))


def test_null_half_width_shrinks_with_seeds_and_with_the_spread(tmp_path, load_benchmark):
    pa = load_benchmark("power_analysis")
    wide, narrow = _wide_and_narrow(pa, tmp_path, 0)
    assert sorted(wide) == list(range(40))

    def median_hw(runs, n):
        r = np.random.default_rng(1)
        return float(np.median([pa.null_half_width(runs, n, 0.9, r, 300)[0] for _ in range(8)]))

    w5, w20, n20 = median_hw(wide, 5), median_hw(wide, 20), median_hw(narrow, 20)
    # independent expectation: the speedup of two arms of n seeds each, with rollouts to target
    # spread by a share c between seeds, has sd about c sqrt(2 / n); the 90% interval's half-width
    # is about 1.645 times that (0.078 at c = 0.15, n = 20; 0.016 at c = 0.03)
    assert 0.6 * 0.078 < w20 < 1.5 * 0.078
    assert 0.6 * 0.016 < n20 < 1.5 * 0.016
    assert w5 > 1.4 * w20  # about 2x: 1 / sqrt(n)


def test_sequential_null_stops_where_the_normal_approximation_says(tmp_path, load_benchmark):
    pa = load_benchmark("power_analysis")
    wide, narrow = _wide_and_narrow(pa, tmp_path, 2)
    # independent expectation (as above): half-width about 1.645 c sqrt(2 / n), so the goal 0.1 is
    # met from n = 2 (1.645 x 0.15 / 0.1)^2 = 12 seeds per arm at c = 0.15, at once at c = 0.03
    ends = [pa.sequential_null(wide, 5, 0.1, np.random.default_rng(k), 300) for k in range(4)]
    for n, hw, _ in ends:
        assert 7 <= n <= 20 and hw <= 0.1
    assert 9 <= float(np.median([n for n, _, _ in ends])) <= 16
    n, hw, holds = pa.sequential_null(narrow, 5, 0.1, np.random.default_rng(0), 300)
    assert n == 5 and hw < 0.05 and holds
    # the second arm made 1.2x faster (its rollout axis / 1.2): the interval moves to 1.2
    n, hw, holds = pa.sequential_null(narrow, 5, 0.1, np.random.default_rng(0), 300, speedup=1.2)
    assert n == 5 and holds
