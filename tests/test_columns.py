"""rollalloc.columns: the share of pass-rate variance a pool column explains, against the
population value of a pool built with a known Beta mixture (never the estimator's formula), and
`rollalloc columns` on a run directory."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rollalloc.columns import column_fit

MU = np.linspace(0.15, 0.85, 10)  # the mean pass rate of each column value
KAPPA = 10.0  # p_i ~ Beta(mu kappa, (1 - mu) kappa) within a value


def _pool(rng, prompts=6000):
    c = rng.integers(0, len(MU), prompts)
    p = rng.beta(MU[c] * KAPPA, (1 - MU[c]) * KAPPA)
    return c, p


def _population_r2():
    """Var E[p | c] / Var p for the mixture: Var(mu_c) / (Var(mu_c) + E[mu (1 - mu)] / (kappa + 1))."""
    between = MU.var()
    within = float(np.mean(MU * (1 - MU))) / (KAPPA + 1)
    return between / (between + within), between + within


@pytest.mark.parametrize("n", [2, 8, 32])
def test_r2_is_the_population_share_whatever_the_group_size(n):
    truth, var_p = _population_r2()
    est = []
    for seed in range(4):
        rng = np.random.default_rng(seed)
        c, p = _pool(rng)
        k = rng.binomial(n, p)
        f = column_fit("c", c, np.arange(len(c)), k, np.full(len(c), n), boot=20, seed=seed)
        est.append((f.r2, f.var_p))
    r2, vp = np.mean(est, axis=0)
    # finite data shrinks the cross-fitted value a little below the population's (m_c's own error)
    assert abs(r2 - truth) < 0.03, (n, r2, truth)
    assert abs(vp - var_p) < 0.1 * var_p, (n, vp, var_p)


@pytest.mark.parametrize("n", [4, 16])
def test_vary_skill_is_the_population_value(n):
    """The skill at telling which groups vary, against Var(E[V | c]) / (m (1 - m)) computed from
    every prompt's exact chance to vary V = 1 - p^n - (1 - p)^n (a Brier-score decomposition)."""
    est, truth = [], []
    mu = np.array([0.01, 0.03, 0.5, 0.97, 0.99])  # values that rarely vary beside one that does
    for seed in range(4):
        rng = np.random.default_rng(seed)
        c = rng.integers(0, len(mu), 6000)
        p = rng.beta(mu[c] * 40, (1 - mu[c]) * 40)
        V = 1 - p**n - (1 - p) ** n
        means = np.array([V[c == j].mean() for j in range(len(mu))])
        truth.append(np.mean((means[c] - V.mean()) ** 2) / (V.mean() * (1 - V.mean())))
        k = rng.binomial(n, p)
        f = column_fit("c", c, np.arange(len(c)), k, np.full(len(c), n), boot=20, seed=seed)
        est.append(f.vary_skill)
        assert abs(f.vary_rate - V.mean()) < 0.02
    assert abs(np.mean(est) - np.mean(truth)) < 0.02, (est, truth)


def test_a_column_unrelated_to_pass_rates_explains_nothing():
    rng = np.random.default_rng(5)
    c, p = _pool(rng)
    k = rng.binomial(8, p)
    noise_column = rng.integers(0, 10, len(c))
    f = column_fit("noise", noise_column, np.arange(len(c)), k, np.full(len(c), 8), boot=50)
    assert abs(f.r2) < 0.02
    assert f.r2_lo < 0 < f.r2_hi or abs(f.r2_lo) < 0.02
    assert f.values == 10 and f.groups == len(c)


def test_revisits_of_a_prompt_stay_in_one_fold():
    """Prompts seen many times: a column with one value per prompt must not explain its own
    prompts (a leak between folds would give it nearly everything)."""
    rng = np.random.default_rng(6)
    c, p = _pool(rng, 800)
    pid = np.repeat(np.arange(800), 6)
    k = rng.binomial(8, p[pid])
    f = column_fit("id", np.arange(800), pid, k, np.full(len(pid), 8), boot=20)
    assert abs(f.r2) < 0.02


def test_no_spread_of_pass_rates_gives_no_r2():
    """Every prompt at p = 0.4: nothing to explain; R^2 is NaN, not a ratio of noise."""
    rng = np.random.default_rng(3)
    N = 2000
    k = rng.binomial(8, 0.4, N)
    f = column_fit("c", rng.integers(0, 5, N), np.arange(N), k, np.full(N, 8), boot=20)
    assert np.isnan(f.r2) and np.isnan(f.r2_lo)
    assert abs(f.vary_skill) < 0.02  # the vary forecast is defined, and empty


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="one entry per group"):
        column_fit("c", [0, 1], [0, 1], [1], [2, 2])
    with pytest.raises(ValueError, match="outside the column"):
        column_fit("c", [0, 1], [0, 2], [1, 1], [2, 2])
    with pytest.raises(ValueError, match=r"\[0, size\]"):
        column_fit("c", [0, 1], [0, 1], [3, 1], [2, 2])
    with pytest.raises(ValueError, match="whole counts"):
        column_fit("c", [0, 1], [0, 1], [0.5, 1], [2, 2])
    with pytest.raises(ValueError, match="no group of 2"):
        column_fit("c", [0, 1], [0, 1], [1, 0], [1, 1])


def _run_dir(tmp_path, trained=True, strategy="grpo", first_without=0):
    """A run directory on arith's default pool whose groups' pass rates follow the answer."""
    from rollalloc.tasks import load_task

    task = load_task("arith", {}, seed=0)
    ans = np.array([int(a) for a in task.train["answer"]])
    p = 1 / (1 + np.exp(-(ans - np.median(ans)) / 4))  # pass rate set by the answer alone
    rng = np.random.default_rng(0)
    run = tmp_path / "run"
    run.mkdir()
    cfg = {"task": "arith", "task_config": {}, "data_seed": 0, "pool_levels": None}
    cfg["strategy"] = strategy
    (run / "run.json").write_text(json.dumps({"config": cfg}))
    with open(run / "steps.jsonl", "w") as fh:
        for step in range(24):
            ids = rng.choice(task.num_train, 64, replace=False)
            rate = rng.binomial(8, p[ids]) / 8
            rec = {"step": step}
            if trained and step >= first_without:
                rec["trained"] = {
                    "prompt_ids": ids.tolist(),
                    "group_sizes": [8] * 64,
                    "success_rate": rate.tolist(),
                }
            fh.write(json.dumps(rec) + "\n")
    return run


def test_cli_ranks_the_column_that_sets_pass_rates_first(tmp_path, capsys):
    from rollalloc.cli import main

    run = _run_dir(tmp_path)
    out = tmp_path / "fits.json"
    assert main(["columns", str(run), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "strata=answer" in text
    fits = json.loads(out.read_text())
    assert fits[0]["column"] == "answer" and fits[0]["r2"] > 0.5 and fits[0]["vary_skill"] > 0.3
    assert {f["column"] for f in fits} == {"answer", "terms", "level"}
    assert main(["columns", str(run), "--columns", "level", "--steps", "4"]) == 0


def test_cli_names_what_is_missing(tmp_path, capsys):
    from rollalloc.cli import main

    run = _run_dir(tmp_path, trained=False)
    assert main(["columns", str(run)]) == 2
    assert "log_groups=true" in capsys.readouterr().err
    (tmp_path / "b").mkdir()
    run2 = _run_dir(tmp_path / "b")
    assert main(["columns", str(run2), "--columns", "difficulty"]) == 2
    assert "no column 'difficulty'" in capsys.readouterr().err
    assert main(["columns", str(tmp_path / "nothing")]) == 2
    assert "not a run directory" in capsys.readouterr().err


def test_cli_reads_records_switched_on_at_a_resume_and_notes_a_choosing_strategy(tmp_path, capsys):
    from rollalloc.cli import main

    run = _run_dir(tmp_path, strategy="pilot-commit", first_without=8)  # log_groups from step 8
    assert main(["columns", str(run)]) == 0
    out = capsys.readouterr().out
    assert "1024 groups" in out  # 16 steps x 64 groups
    assert "trained with pilot-commit" in out
    assert main(["columns", str(run), "--columns", ","]) == 2
    assert "names no column" in capsys.readouterr().err
    lines = (run / "steps.jsonl").read_text().splitlines()
    rec = json.loads(lines[-1])
    rec["trained"]["success_rate"][0] = 0.3  # 2.4 successes of 8: not a binary reward
    (run / "steps.jsonl").write_text("\n".join(lines[:-1] + [json.dumps(rec)]) + "\n")
    assert main(["columns", str(run)]) == 2
    assert "whole counts" in capsys.readouterr().err


def test_answer_skew_tv_is_the_largest_difference_over_events(load_benchmark):
    """benchmarks/answer_skew.py's total variation distance against its other definition, the
    largest |P(A) - Q(A)| over every set A of values (brute force over a small support)."""
    import collections
    import itertools

    tv = load_benchmark("answer_skew").tv
    rng = np.random.default_rng(3)
    for _ in range(20):
        a = collections.Counter(rng.choice(list("abcde"), size=rng.integers(5, 40)))
        b = collections.Counter(rng.choice(list("abcdef"), size=rng.integers(5, 40)))
        na, nb = sum(a.values()), sum(b.values())
        best = max(
            abs(sum(a[k] for k in A) / na - sum(b[k] for k in A) / nb)
            for r in range(7)
            for A in itertools.combinations("abcdef", r)
        )
        assert tv(a, b) == pytest.approx(best)
