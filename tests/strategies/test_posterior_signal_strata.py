"""posterior-signal's strata: a prior per group of prompts (a task column such as arith's level),
checked against the generating distributions, a Monte Carlo shift, and resume."""

from __future__ import annotations

import numpy as np
import pytest

from rollalloc.allocator import make_allocator
from rollalloc.state import load_state, save_state
from rollalloc.strategies.posterior_signal import PosteriorSignal
from rollalloc.testing import BernoulliPool, drive

GROUPS = {"low": (1.0, 9.0), "mid": (4.0, 4.0), "high": (9.0, 1.0)}  # Beta(A, B) of each group


def ranking(N: int, B: int, n: int, seed: int = 0, **kw):
    """posterior-signal in its ranking mode (select=top), over N prompts, B groups of n a step."""
    return make_allocator(
        "posterior-signal", num_prompts=N, seed=seed, train_prompts=B, n=n, select="top", **kw
    )


def labelled_pool(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    labels = rng.choice(list(GROUPS), n)
    p = np.array([rng.beta(*GROUPS[g]) for g in labels])
    return labels, p


def test_each_group_prior_recovers_its_generating_beta():
    n, N = 8, 30000
    labels, p = labelled_pool(N, seed=1)
    s = np.random.default_rng(2).binomial(n, p).astype(np.float64)
    ids = np.arange(N)
    for strata in ("", "level"):
        alloc = PosteriorSignal(
            N, seed=0, train_prompts=4, n=n, prior_ema=0.001, strata=strata, group_ema=0
        )
        if strata:
            alloc.set_pool_columns({"level": labels, "other": np.zeros(N)})
        nn, m, k = np.full(N, float(n)), np.full(N, 0.5), np.full(N, 2.0)
        alloc._update(ids, nn, s, m, k, fit=False)  # every group a first visit
        A, B, shift = alloc._unseen_prior(ids)
        for g, (a, b) in GROUPS.items():
            got = (A / (A + B))[labels == g]
            want = (
                a / (a + b)
                if strata
                else float(np.mean([x / (x + y) for x, y in [GROUPS[h] for h in labels]]))
            )
            assert got == pytest.approx(want, abs=0.03), (strata, g)
            if strata:  # the spread within the group: A + B of its Beta, within 25%
                assert (A + B)[labels == g][0] == pytest.approx(a + b, rel=0.25), g
        assert not shift.any()  # no drift yet


def test_a_group_prior_is_read_at_the_drift_since_its_first_visits():
    n, N = 8, 20000
    labels, p = labelled_pool(N, seed=3)
    s = np.random.default_rng(4).binomial(n, p).astype(np.float64)
    alloc = PosteriorSignal(
        N, seed=0, train_prompts=4, n=n, prior_ema=0.001, strata="level", group_ema=0
    )
    alloc.set_pool_columns({"level": labels})
    half = np.arange(N // 2)
    alloc._update(
        half,
        np.full(len(half), 8.0),
        s[half],
        np.full(len(half), 0.5),
        np.full(len(half), 2.0),
        fit=False,
    )
    alloc.D += 1.0  # the pool has got better by one logit since those first visits
    rest = np.arange(N // 2, N)
    m = alloc.posterior(rest)[0]
    rng = np.random.default_rng(5)
    for g, (a, b) in GROUPS.items():  # E[sigmoid(logit q + 1)], q ~ the group's Beta
        q = rng.beta(a, b, 200000)
        want = np.mean(1 / (1 + np.exp(-(np.log(q / (1 - q)) + 1.0))))
        assert m[labels[rest] == g][0] == pytest.approx(want, abs=0.03), g


def test_with_strata_the_informative_group_is_chosen():
    """Groups at p = 0.01, 0.5, 0.99: top selection from a window of 2 can train at most 2/3 of
    its batch from the middle group (a third of every window); without strata it cannot tell."""
    N = 3000
    labels = np.repeat(["hard", "mid", "easy"], N // 3)
    p = {"hard": 0.01, "mid": 0.5, "easy": 0.99}
    perm = np.random.default_rng(0).permutation(N)
    labels = labels[perm]
    share = {}
    for strata in ("", "level"):
        alloc = ranking(N, 16, 16, n_probe=0, window=2, explore="mean", strata=strata)
        assert alloc.pool_columns() == (("level",) if strata else ())
        if strata:
            alloc.set_pool_columns({"level": labels})
        pool = BernoulliPool(p=np.array([p[g] for g in labels]), seed=0)
        batches = drive(alloc, pool, 60)
        share[strata] = np.mean([np.mean(labels[b.prompt_ids] == "mid") for b in batches[30:]])
    assert share[""] < 0.45
    assert share["level"] > 0.6


def test_in_the_stream_mode_strata_skip_the_unseen_of_groups_that_cannot_vary():
    """The default mode (select=stream) with groups at p = 0.01, 0.5, 0.99: without strata every
    unseen prompt is looked at (probed or given a group); with strata, once a group's prior is
    fitted, its unseen prompts are judged as the seen are (P(variance in n) >= tau), so the
    rollouts go to the middle group. The default probe_judged (4 with strata) adds one first look
    per written-off group every 4 steps: over steps 20-79 at most 16 windows x 2 groups x n = 16
    rollouts (a first look is at most a full group) of 60 x 256 (with group_ema = 0; its default,
    0.1, lets the pool's prior, a third of it at p = 0.5, hold 29% of each group's: measured,
    4.3-4.8% of the rollouts go to hard and easy over seeds 0-2, against 3.4-3.6% with 0)."""
    N = 3000
    labels = np.repeat(["hard", "mid", "easy"], N // 3)[np.random.default_rng(0).permutation(N)]
    p = np.array([{"hard": 0.01, "mid": 0.5, "easy": 0.99}[g] for g in labels])
    spent = {}
    for strata, probe_judged, group_ema in (
        ("", None, None), ("level", 0, 0), ("level", None, 0), ("level", None, None)
    ):  # fmt: skip
        alloc = make_allocator(
            "posterior-signal", num_prompts=N, seed=0, train_prompts=16, n=16, strata=strata,
            probe_judged=probe_judged, group_ema=group_ema,
        )  # fmt: skip
        if strata:
            alloc.set_pool_columns({"level": labels})
        pool = BernoulliPool(p=p, seed=0)
        drive(alloc, pool, 80)  # within the first epoch: every look is a first look
        later = [r for r in pool.log if r.step >= 20]
        ids = np.concatenate([r.prompt_ids for r in later])
        k = np.concatenate([r.num_rollouts for r in later])
        spent[strata, probe_judged, group_ema] = k[labels[ids] != "mid"].sum() / k.sum()
    assert spent["", None, None] > 0.25  # the stream looks at a third of its prompts in vain
    off, refresh = spent["level", 0, 0], spent["level", None, 0]
    assert off < 0.03
    assert off < refresh <= off + 16 * 2 * 16 / (60 * 256)
    assert refresh < spent["level", None, None] < 0.06  # the default: a budget, not a derivation


def test_resume_with_strata_continues_identically(tmp_path):
    N = 400
    labels, p = labelled_pool(N, seed=7)

    def build(seed=5):
        alloc = ranking(N, 8, 8, seed=seed, window=2, strata="level", half_life=5.0)
        alloc.set_pool_columns({"level": labels})
        return alloc

    def trace(bs):
        return [(b.prompt_ids.tolist(), b.group_sizes.tolist()) for b in bs]

    straight = trace(drive(build(), BernoulliPool(p=p, seed=1), 30))
    pool = BernoulliPool(p=p, seed=1)
    first = build()
    head = trace(drive(first, pool, 12))
    save_state(tmp_path / "a.npz", first.state_dict())
    resumed = build(seed=99)
    resumed.load_state_dict(load_state(tmp_path / "a.npz"))
    assert head + trace(drive(resumed, pool, 18)) == straight


def test_bad_strata_are_refused_by_name():
    alloc = PosteriorSignal(10, seed=0, train_prompts=2, n=4, strata="level")
    with pytest.raises(ValueError, match="no column 'level'.*'terms'"):
        alloc.set_pool_columns({"terms": np.zeros(10)})
    with pytest.raises(ValueError, match="column 'level' has 9 values for 10 pool prompts"):
        alloc.set_pool_columns({"level": np.zeros(9)})
    with pytest.raises(ValueError, match="strata must be a task column name"):
        PosteriorSignal(10, seed=0, train_prompts=2, n=4, strata=3)


def test_columns_are_wired_from_a_mapping_a_dataset_and_verl_extra_info():
    """The trainer passes task.train (a mapping), TRL a Hugging Face Dataset, verl its
    RLHFDataset (a `dataframe`, metadata under extra_info): each gives the same groups."""
    datasets = pytest.importorskip("datasets")
    from rollalloc.allocator import wire_pool_columns

    levels = ["2x1d", "7x1d", "2x1d", "3x1d"]
    mapping = {"prompt": ["a", "b", "c", "d"], "level": levels}
    ds = datasets.Dataset.from_dict(mapping)
    verl_like = type(
        "RLHFDataset",
        (),
        {
            "dataframe": datasets.Dataset.from_dict(
                {"prompt": mapping["prompt"], "extra_info": [{"level": v} for v in levels]}
            )
        },
    )()
    for table, column in ((mapping, "level"), (ds, "level"), (verl_like, "extra_info.level")):
        alloc = PosteriorSignal(4, seed=0, train_prompts=2, n=4, strata=column)
        wire_pool_columns(alloc, table)
        assert alloc.stratum.tolist() == [0, 2, 0, 1], column  # sorted labels 2x1d < 3x1d < 7x1d
    alloc = PosteriorSignal(4, seed=0, train_prompts=2, n=4, strata="extra_info.source")
    with pytest.raises(ValueError, match="rows without 'source'"):
        wire_pool_columns(alloc, verl_like)
    alloc = PosteriorSignal(4, seed=0, train_prompts=2, n=4, strata="difficulty")
    with pytest.raises(ValueError, match="no column 'difficulty'.*'level'"):
        wire_pool_columns(alloc, ds)
    wire_pool_columns(PosteriorSignal(4, seed=0, train_prompts=2, n=4), {})  # reads none: no-op


@pytest.mark.parametrize("a", [0.2, 5.0])
def test_fill_draws_about_b_over_the_pools_share_of_groups_with_variance(a):
    """select=top, fill: a step draws candidates until they hold B groups with reward variance in
    expectation, so on a pool of unseen prompts with p ~ Beta(a, a) it looks at about B / V
    candidates, V = E[1 - p^n - (1-p)^n] by Monte Carlo (0.44 for a = 0.2, 1.0 for a = 5)."""
    n, B, N = 16, 16, 40000
    rng = np.random.default_rng(0)
    p = rng.beta(a, a, N)
    q = rng.beta(a, a, 2_000_000)
    V = float(np.mean(1 - q**n - (1 - q) ** n))
    alloc = ranking(N, B, n, n_probe=0, fill=True, window=16, explore="mean")
    batches = drive(alloc, BernoulliPool(p=p, seed=0), 60)
    cands = [b.stats.decisions["candidates"] for b in batches[20:]]  # the prior is fitted by now
    assert np.mean(cands) == pytest.approx(B / V, rel=0.15)
    assert all(len(b.prompt_ids) == B for b in batches)


def test_fill_keeps_a_full_batch_across_epoch_boundaries_of_a_tiny_pool():
    """A review found short batches: at an epoch boundary the new epoch brings back prompts this
    step already drew, and a chunk of only those ended the window early (N=64, B=16, step 223)."""
    for N, B, n in ((64, 16, 8), (40, 8, 4), (100, 16, 8)):
        alloc = ranking(N, B, n, fill=True, window=16, explore="mean", n_probe=0)
        for b in drive(alloc, BernoulliPool.mixed(N, seed=1), 300):
            assert len(b.prompt_ids) == B and len(set(b.prompt_ids.tolist())) == B, (N, b.step)


def test_strata_never_given_or_given_wrong_are_refused():
    alloc = make_allocator(
        "posterior-signal", num_prompts=20, seed=0, train_prompts=4, n=4, strata="level"
    )
    with pytest.raises(ValueError, match="the pool's column was never given"):
        alloc.ask()
    with pytest.raises(ValueError, match="missing values"):
        alloc.set_pool_columns({"level": ["a"] * 19 + [None]})


@pytest.mark.parametrize("columns_first", [True, False])
def test_resume_refuses_a_pool_whose_groups_are_not_the_states(tmp_path, columns_first):
    """Columns set before or after load_state_dict: another set of group names is refused once the
    state has learnt group priors (a renamed group, a single-group pool), the same one is not."""
    N = 60
    labels = np.array(["a", "b", "c"] * 20)

    def build(lab):
        return ranking(N, 4, 4, window=2, strata="level"), {"level": lab}

    first, cols = build(labels)
    first.set_pool_columns(cols)
    drive(first, BernoulliPool.mixed(N, seed=0), 5)
    save_state(tmp_path / "s.npz", first.state_dict())
    for lab, ok in (
        (labels, True),
        (np.array(["a", "b", "d"] * 20), False),
        (np.array(["a"] * N), False),
    ):
        alloc, cols = build(lab)
        steps = [
            lambda a=alloc, c=cols: a.set_pool_columns(c),
            lambda a=alloc: a.load_state_dict(load_state(tmp_path / "s.npz")),
        ]
        if not columns_first:
            steps.reverse()
        if ok:
            for f in steps:
                f()
            assert alloc.strata_names == ["a", "b", "c"]
        else:
            steps[0]()
            with pytest.raises(ValueError, match="the state's groups"):
                steps[1]()


def test_probe_judged_revisits_a_level_written_off_once_it_becomes_learnable():
    # Two levels of 2,000 prompts: "a" at p = 0.5, "b" at p = 0.005, where a group of 32 rarely
    # varies, so b's prior (fitted on its first visits) judges b's unseen prompts untrainable.
    # Then b becomes learnable (p = 0.4: transfer from training a, as the paper testbed's 3-term
    # chains do). Without probe_judged no b prompt is ever looked at again: its prior is never
    # refitted and the pool drift, read from a's revisits, does not move. With it, b's prompts
    # get a refresh probe every 4 steps, the first visits refit the prior, and b is trained.
    N = 4000
    labels = np.array(["a"] * (N // 2) + ["b"] * (N // 2))

    def share_of_b_after_the_change(probe_judged: bool) -> float:
        pool = BernoulliPool(p=np.where(labels == "a", 0.5, 0.005), seed=0)
        alloc = make_allocator(
            "posterior-signal", num_prompts=N, seed=0, train_prompts=16, n=32, strata="level",
            probe_judged=4 if probe_judged else 0,
        )  # fmt: skip
        alloc.set_pool_columns({"level": labels})
        drive(alloc, pool, 40)
        pool.p[labels == "b"] = 0.4
        late = drive(alloc, pool, 60)[30:]
        return float(np.mean([(labels[b.prompt_ids] == "b").mean() for b in late]))

    assert share_of_b_after_the_change(False) < 0.02
    assert share_of_b_after_the_change(True) > 0.3  # b varies in 98% of groups now, a in 100%


def test_probe_judged_needs_strata_and_the_stream():
    with pytest.raises(ValueError, match="probe_judged=2 probes prompts judged"):
        make_allocator("posterior-signal", num_prompts=10, train_prompts=2, probe_judged=2)
    with pytest.raises(ValueError, match="acts only with select='stream'"):
        make_allocator(
            "posterior-signal", num_prompts=10, train_prompts=2, probe_judged=2,
            strata="level", select="top",
        )  # fmt: skip


@pytest.mark.parametrize("N,extra", [(2000, {}), (200, {"group_ema": 0.1})])
def test_resume_with_probe_judged_continues_identically(tmp_path, N, extra):
    # the steps of each group's last first visit are state: a resumed run refreshes the same
    # written-off groups at the same steps as an uninterrupted one (N = 200: a small pool, whose
    # windows late in the run hold refresh probes and no other unseen prompt)
    labels = np.array(["a", "b", "c", "d"] * (N // 4))
    p = np.select([labels == "a", labels == "b", labels == "c"], [0.5, 0.004, 0.995], 0.3)

    def build(seed=3):
        alloc = make_allocator(
            "posterior-signal", num_prompts=N, seed=seed, train_prompts=8, n=32, strata="level",
            probe_judged=3, **extra,
        )  # fmt: skip
        alloc.set_pool_columns({"level": labels})
        return alloc

    def trace(bs):
        return [(b.prompt_ids.tolist(), b.group_sizes.tolist()) for b in bs]

    straight = trace(drive(build(), BernoulliPool(p=p, seed=1), 60))
    pool = BernoulliPool(p=p, seed=1)
    first = build()
    head = trace(drive(first, pool, 25))
    save_state(tmp_path / "a.npz", first.state_dict())
    resumed = build(seed=99)
    resumed.load_state_dict(load_state(tmp_path / "a.npz"))
    assert head + trace(drive(resumed, pool, 35)) == straight


def test_a_refresh_is_one_probe_per_written_off_group():
    # A small pool like the paper testbed's: a hopeless level (p = 0), a solved one (p = 0.995) and
    # a band (p ~ Beta(2, 3)); groups of 32, probes of 8 (forced). By step 60 the band's unseen
    # prompts run short, as late in a real run. Once the two degenerate levels are written off,
    # probe_judged=4 adds one probe of 8 per written-off level every 4 steps (and its extension to
    # 32 where it varies): over steps 60-119 at most 15 x 2 x 32 = 960 rollouts on those levels
    # beyond what the run spends there without it. (The first implementation let each refresh
    # widen the step's probe round to ~1 / P(vary) probes of written-off prompts: 2,229 here.)
    N = 1500
    rng = np.random.default_rng(0)
    labels = rng.choice(["hopeless", "solved", "band"], N, p=[0.37, 0.22, 0.41])
    p = np.where(labels == "hopeless", 0.0, np.where(labels == "solved", 0.995, rng.beta(2, 3, N)))

    def spent_on_degenerate(probe_judged: int) -> int:
        alloc = make_allocator(
            "posterior-signal", num_prompts=N, seed=0, train_prompts=16, n=32, strata="level",
            probe_judged=probe_judged, probe_if_cheaper=False,
        )  # fmt: skip
        alloc.set_pool_columns({"level": labels})
        pool = BernoulliPool(p=p, seed=0)
        drive(alloc, pool, 120)
        later = [r for r in pool.log if r.step >= 60]
        ids = np.concatenate([r.prompt_ids for r in later])
        k = np.concatenate([r.num_rollouts for r in later])
        return int(k[labels[ids] != "band"].sum())

    off, on = spent_on_degenerate(0), spent_on_degenerate(4)
    assert 0 < on - off <= 15 * 2 * 32


def test_group_ema_takes_a_written_off_level_up_sooner_once_it_becomes_learnable():
    # The refresh test's pool (above): b at p = 0.005 for 40 steps, then p = 0.4. With the
    # default weight of a first visit (prior_ema = 0.01) b's prior is an equal-weight average of
    # all its first visits, so the refresh probes at p = 0.4 outweigh the early ones at 0.005
    # only slowly: b is first taken up 25-41 steps after the change (seeds 0-3). With
    # group_ema = 0.1 its prior follows its last ~10 first visits, with the pool's (half of it
    # at p = 0.5 here) worth 4 of them: 0-4 steps. The price: before the change, 9-14% of the
    # trained groups are b's (hopeless then) against 1.5%.
    N = 4000
    labels = np.array(["a"] * (N // 2) + ["b"] * (N // 2))

    def steps_to_take_b_up(group_ema: float, seed: int) -> tuple[int, float]:
        pool = BernoulliPool(p=np.where(labels == "a", 0.5, 0.005), seed=seed)
        alloc = make_allocator(
            "posterior-signal", num_prompts=N, seed=seed, train_prompts=16, n=32, strata="level",
            group_ema=group_ema,
        )  # fmt: skip
        alloc.set_pool_columns({"level": labels})
        before = drive(alloc, pool, 40)[10:]
        pool.p[labels == "b"] = 0.4
        share = [(labels[b.prompt_ids] == "b").mean() for b in drive(alloc, pool, 40)]
        first = next((i for i, x in enumerate(share) if x >= 0.25), 99)
        return first, float(np.mean([(labels[b.prompt_ids] == "b").mean() for b in before]))

    for seed in (0, 1):
        (slow, b_off), (fast, b_on) = steps_to_take_b_up(0.0, seed), steps_to_take_b_up(0.1, seed)
        assert fast <= 8 < 20 <= slow
        assert b_off < 0.03 and b_on < 0.2


def test_group_ema_needs_strata_and_is_at_most_a_half():
    with pytest.raises(ValueError, match="set strata too"):
        make_allocator("posterior-signal", num_prompts=10, train_prompts=2, group_ema=0.1)
    with pytest.raises(ValueError, match="group_ema"):
        make_allocator(
            "posterior-signal", num_prompts=10, train_prompts=2, strata="level", group_ema=0.8
        )


@pytest.mark.parametrize("seed", [0, 1])
def test_a_step_whose_only_unseen_prompts_are_refreshes_is_asked(seed):
    # A pool of 100 with four levels (two of them written off), groups of 32: by step ~25 every
    # prompt has been seen except those of the written-off levels, and a window can hold a
    # refresh probe (probe_judged) and no other unseen prompt. Session 25's default raised there
    # (the mean chance to vary of zero probes was NaN); all 80 steps must run, each a full batch.
    N = 100
    labels = np.array(["a", "b", "c", "d"] * (N // 4))
    p = np.select([labels == "a", labels == "b", labels == "c"], [0.5, 0.004, 0.995], 0.3)
    alloc = make_allocator(
        "posterior-signal", num_prompts=N, seed=seed, train_prompts=8, n=32, strata="level"
    )
    alloc.set_pool_columns({"level": labels})
    batches = drive(alloc, BernoulliPool(p=p, seed=seed), 80)
    assert [b.num_groups for b in batches] == [8] * 80
    assert sum(b.stats.decisions.get("refresh_probes", 0) for b in batches) > 0


def test_the_refresh_and_a_groups_recent_memory_are_default_with_a_column_in_the_stream():
    def cfg(**kw):
        return make_allocator("posterior-signal", num_prompts=10, train_prompts=2, **kw).config

    on = cfg(strata="level")
    assert (on.probe_judged, on.group_ema) == (4, 0.1)
    for kw in ({}, {"strata": "level", "select": "top"}, {"strata": "level", "probe_judged": 0}):
        assert cfg(**kw).group_ema == 0.0, kw
    assert cfg(strata="level", group_ema=0.0).group_ema == 0.0  # the user's setting wins
