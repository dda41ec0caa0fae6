"""End-to-end runs of the real trainer on a tiny model: every strategy, resume, warm-start cache."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import torch

from rollalloc.train.trainer import TIMING_KEYS, build_parts, prepare_policy, train

PER_STRATEGY = {
    "grpo": {},
    "dapo": {"on_max_rounds": "train"},
    "pilot-commit": {"on_max_rounds": "train"},
    "cero": {},
}


def _params(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.named_parameters()}


def _read(path):
    return [json.loads(line) for line in open(path)]


@pytest.mark.parametrize("strategy", list(PER_STRATEGY))
def test_short_run_learns_something_and_accounts_exactly(small_config, strategy):
    cfg = small_config(strategy=strategy, max_steps=3, strategy_config=PER_STRATEGY[strategy])
    parts = build_parts(cfg, log=None)
    before = _params(parts.model)
    summary = train(cfg, parts=parts, log=lambda *_: None)
    steps = _read(f"{cfg.out}/steps.jsonl")
    assert len(steps) == summary["steps"] == 3
    # exact accounting: every generated rollout counted once, by phase, by the allocator
    generated = parts.sampler.store.next_handle
    assert sum(s["rollouts"] for s in steps) == parts.allocator.cum_rollouts == generated
    assert all(s["rollouts"] == sum(s["rollouts_by_phase"].values()) for s in steps)
    assert steps[-1]["cum_rollouts"] == generated
    assert sum(sum(s["tokens_by_phase"].values()) for s in steps) == parts.allocator.cum_tokens
    # the store holds exactly the rollouts the allocator still refers to (Pilot-Commit's buffer)
    live = set(np.asarray(parts.allocator.state_dict()["live"]).tolist())
    assert set(parts.sampler.store.rollouts) == live
    trained = [s for s in steps if s["trained_rollouts"] > 0]
    assert trained, "no step trained anything"
    for s in trained:
        assert np.isfinite(s["learner"]["loss"])
    after = _params(parts.model)
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert len(changed) == len(before), f"unchanged: {set(before) - set(changed)}"
    evals = _read(f"{cfg.out}/evals.jsonl")
    assert evals[0]["cum_rollouts"] == 0 and evals[-1]["cum_rollouts"] == generated
    assert 0 <= evals[-1]["accuracy"] <= 1


def _strip(records):
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in records]


@pytest.mark.parametrize("strategy", ["pilot-commit"])
def test_resume_is_identical_to_an_uninterrupted_run(small_config, tmp_path, strategy):
    opts = {"strategy": strategy, "strategy_config": PER_STRATEGY[strategy], "checkpoint_every": 2}
    straight = small_config(max_steps=6, out=str(tmp_path / "a"), **opts)
    pa = build_parts(straight, log=None)
    train(straight, parts=pa, log=lambda *_: None)

    first = small_config(max_steps=3, out=str(tmp_path / "b"), **opts)
    train(first, log=lambda *_: None)
    # the interrupted process wrote an extra final evaluation and may have logged steps past its
    # checkpoint; resume must still reproduce the straight run exactly
    second = small_config(max_steps=6, out=str(tmp_path / "b"), **opts)
    pb = build_parts(second, log=None)
    train(second, parts=pb, resume=True, log=lambda *_: None)

    for (k, va), (_, vb) in zip(pa.model.state_dict().items(), pb.model.state_dict().items()):
        assert torch.equal(va, vb), k
    steps_a, steps_b = _read(tmp_path / "a/steps.jsonl"), _read(tmp_path / "b/steps.jsonl")
    assert len(steps_a) == 6 and _strip(steps_a) == _strip(steps_b)
    assert _strip(_read(tmp_path / "a/evals.jsonl")) == _strip(_read(tmp_path / "b/evals.jsonl"))


def test_resume_rejects_another_configuration(small_config, tmp_path):
    cfg = small_config(max_steps=2, out=str(tmp_path / "r"))
    train(cfg, log=lambda *_: None)
    other = small_config(max_steps=4, out=str(tmp_path / "r"), learner={"lr": 0.5})
    with pytest.raises(ValueError, match="another configuration"):
        train(other, resume=True, log=lambda *_: None)


def test_a_finished_run_is_never_overwritten_by_the_library_call(small_config, tmp_path):
    cfg = small_config(max_steps=1, out=str(tmp_path / "r"))
    train(cfg, log=lambda *_: None)
    before = {p.name: p.read_bytes() for p in (tmp_path / "r").iterdir() if p.is_file()}
    with pytest.raises(ValueError, match="already holds a run.*resume"):
        train(cfg, log=lambda *_: None)
    after = {p.name: p.read_bytes() for p in (tmp_path / "r").iterdir() if p.is_file()}
    assert after == before


def test_warm_start_is_cached_and_reused(small_config, monkeypatch):
    from rollalloc.train import warmstart

    cfg = small_config(max_steps=1, data_seed=5, warm_start={"steps": 5})
    task = build_parts.__globals__["build_task"](cfg)
    path1, meta1 = prepare_policy(cfg, task, log=None)
    assert sum(meta1["pass_rates"]["histogram"].values()) == 16

    def boom(*a, **k):
        raise AssertionError("warm start recomputed")

    monkeypatch.setattr(warmstart, "sft", boom)
    path2, meta2 = prepare_policy(cfg, task, log=None)
    assert path1 == path2 and meta1 == meta2
    # another SFT setting is another cache entry
    other = small_config(max_steps=1, data_seed=5, warm_start={"steps": 6})
    with pytest.raises(AssertionError, match="recomputed"):
        prepare_policy(other, task, log=None)


def test_warm_start_is_built_on_one_thread_whatever_the_caller_runs_with(small_config, monkeypatch):
    """The trained policy depends on the thread count (a float sum's order), and one cache key
    must name one policy: `rollalloc compare` used to build it on torch's default threads and
    `rollalloc train --threads 1` on one. The SFT and the pass-rate measurement now run on
    WARM_START_THREADS (1) threads; the caller's count is back afterwards; meta records it."""
    from rollalloc.train import warmstart

    seen = []
    real_sft, real_rates = warmstart.sft, warmstart.measure_pass_rates

    def spy_sft(*a, **k):
        seen.append(("sft", torch.get_num_threads()))
        return real_sft(*a, **k)

    def spy_rates(*a, **k):
        seen.append(("rates", torch.get_num_threads()))
        return real_rates(*a, **k)

    monkeypatch.setattr(warmstart, "sft", spy_sft)
    monkeypatch.setattr(warmstart, "measure_pass_rates", spy_rates)
    cfg = small_config(max_steps=1, data_seed=11, warm_start={"steps": 3}, threads=0)
    task = build_parts.__globals__["build_task"](cfg)
    torch.set_num_threads(2)
    try:
        _, meta = prepare_policy(cfg, task, log=None)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(1)
    assert seen == [("sft", 1), ("rates", 1)] and meta["threads"] == 1


def test_warm_start_levels_trains_on_those_prompts_only(small_config, monkeypatch):
    from rollalloc.train import warmstart

    cfg = small_config(
        max_steps=1,
        data_seed=6,
        task_config={"num_train": 96, "num_eval": 32, "terms": [2, 3]},
        warm_start={"steps": 3, "levels": ["3x1d"], "data": "disjoint"},
    )
    task = build_parts.__globals__["build_task"](cfg)
    seen: list[list[int]] = []
    real_encode = warmstart.encode_prompts

    def spy(tokenizer, texts):
        seen.append(list(texts))
        return real_encode(tokenizer, texts)

    monkeypatch.setattr(warmstart, "encode_prompts", spy)
    prepare_policy(cfg, task, log=None)
    # the warm start trains on the task's own split, disjoint from the pool (warm_start.data)
    want = [p for p, lv in zip(task.sft["prompt"], task.sft["level"]) if lv == "3x1d"]
    assert 0 < len(want) < len(task.sft["prompt"]) and seen[0] == want
    assert not set(want) & set(task.train["prompt"])

    bad = small_config(max_steps=1, data_seed=6, warm_start={"steps": 3, "levels": ["9x1d"]})
    with pytest.raises(ValueError, match="match no example"):
        prepare_policy(bad, build_parts.__globals__["build_task"](bad), log=None)


def test_learner_logprobs_use_the_sampling_temperature(small_config):
    """On-policy (one mini-batch, first step) the importance ratio against the behaviour log-probs
    is 1 only if the learner scores the rollouts at the temperature they were sampled at."""
    cfg = small_config(max_steps=1, temperature=0.7, learner={"num_minibatches": 1, "lr": 0.0})
    train(cfg, log=lambda *_: None)
    learner = _read(f"{cfg.out}/steps.jsonl")[0]["learner"]
    assert learner["ratio_mean"] == pytest.approx(1.0, abs=1e-4)
    assert abs(learner["approx_kl"]) < 1e-5

    with pytest.raises(ValueError, match="learner.temperature"):
        small_config(max_steps=1, temperature=0.7, learner={"temperature": 0.5})


def test_cache_key_ignores_options_left_at_none():
    from rollalloc.train.warmstart import cache_key

    base = {"warm_start": {"steps": 600}, "task_config": {"terms": [2, 3]}}
    later = {"warm_start": {"steps": 600, "levels": None}, "task_config": {"terms": [2, 3]}}
    assert cache_key(base) == cache_key(later)  # a new option at its default keeps old caches
    assert cache_key(base) != cache_key({**later, "warm_start": {"steps": 600, "levels": ["2"]}})


def test_warm_start_seed_gives_another_warm_start_and_none_keeps_the_cache(small_config):
    from rollalloc.train.trainer import build_task

    base = small_config(max_steps=1)
    same = small_config(max_steps=1, warm_start={"seed": base.data_seed})
    other = small_config(max_steps=1, warm_start={"seed": base.data_seed + 7})
    paths, metas = {}, {}
    for name, cfg in (("base", base), ("same", same), ("other", other)):
        paths[name], metas[name] = prepare_policy(cfg, build_task(cfg), log=lambda *_: None)
    # the default (None) is data_seed's warm start, under the key it had before the option (None
    # is left out of the key); an explicit seed is a key of its own and, when it is another seed,
    # another policy (its SFT loss differs), the same seed the same policy
    assert metas["base"]["config"].get("seed") is None
    assert paths["other"] != paths["base"] and paths["same"] != paths["base"]
    assert metas["other"]["sft"]["final_loss"] != metas["base"]["sft"]["final_loss"]
    assert metas["same"]["sft"]["final_loss"] == metas["base"]["sft"]["final_loss"]
    with pytest.raises(ValueError, match="warm_start.seed"):
        small_config(max_steps=1, warm_start={"seed": -1})


def test_a_warm_start_records_its_weights_fingerprint_and_library_versions(small_config, tmp_path):
    """The cache key names the recipe; a rebuild under other library versions keeps the key and
    can train another policy (session 39). meta.json (and so run.json) carries a fingerprint of
    the weights: two builds of one recipe here are one policy (equal weights, equal fingerprint),
    another seed another (different weights, different fingerprint)."""
    import transformers

    from rollalloc.train.model import load_policy
    from rollalloc.train.trainer import build_task

    built = {}
    for name, cache, seed in (("a", "c1", 13), ("b", "c2", 13), ("other", "c3", 14)):
        cfg = small_config(max_steps=1, warm_start={"steps": 3, "seed": seed},
                           cache_dir=str(tmp_path / cache))  # fmt: skip
        path, meta = prepare_policy(cfg, build_task(cfg), log=None)
        built[name] = (load_policy(path)[0].state_dict(), meta)
    (wa, ma), (wb, mb), (wo, mo) = built["a"], built["b"], built["other"]
    assert all(torch.equal(wa[k], wb[k]) for k in wa) and ma["fingerprint"] == mb["fingerprint"]
    assert not all(torch.equal(wa[k], wo[k]) for k in wa)
    assert mo["fingerprint"] != ma["fingerprint"] and len(ma["fingerprint"]) == 20
    assert ma["versions"] == {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "numpy": np.__version__,
    }


def test_pool_levels_trains_on_those_levels_from_the_same_warm_start(small_config):
    """pool_levels cuts the pool to the prompts of those levels (counted here from the full task's
    level column); the warm start is the full config's (same cached checkpoint) and the held-out
    set is unchanged; a level the pool lacks fails before any work, naming the pool's levels."""
    from rollalloc.train.preflight import check_task
    from rollalloc.train.trainer import build_task

    task_config = {"num_train": 96, "num_eval": 32, "terms": [2, 3]}
    full = small_config(task_config=task_config, max_steps=2)
    cut = small_config(task_config=task_config, max_steps=2, pool_levels=["3x1d"])
    assert small_config(max_steps=2, pool_levels="3x1d, 2x1d,3x1d").pool_levels == ["2x1d", "3x1d"]
    with pytest.raises(ValueError, match="pool_levels must be a list of level names"):
        small_config(max_steps=2, pool_levels=3)
    full_task = build_task(full)
    want = [p for p, lv in zip(full_task.train["prompt"], full_task.train["level"]) if lv == "3x1d"]
    assert 0 < len(want) < full_task.num_train
    parts = build_parts(cut, log=None)
    assert parts.task.train["prompt"] == want
    assert set(parts.task.train["level"]) == {"3x1d"}
    assert parts.task.eval == full_task.eval
    assert (
        prepare_policy(cut, full_task, log=None)[0] == prepare_policy(full, full_task, log=None)[0]
    )
    train(cut, parts=parts, log=lambda *_: None)
    steps = _read(f"{cut.out}/steps.jsonl")
    assert sum(s["trained_rollouts"] for s in steps) > 0
    assert json.loads(open(f"{cut.out}/run.json").read())["config"]["pool_levels"] == ["3x1d"]
    with pytest.raises(
        ValueError, match=r"unknown levels \['9x1d'\]; the pool has \['2x1d', '3x1d'\]"
    ):
        check_task(
            small_config(task_config=task_config, max_steps=2, pool_levels=["9x1d"]), full_task
        )


def test_pool_size_trains_on_a_seeded_subset_from_the_same_warm_start(small_config):
    """pool_size keeps that many pool prompts (after pool_levels), a subset drawn with data_seed
    (or pool_seed) in the pool's order, the same for every run of a config; the warm start and the
    held-out set are the full config's; a size larger than the (cut) pool, or not a positive
    integer, fails before any work, naming both."""
    from rollalloc.tasks import run_pool
    from rollalloc.train.preflight import check_task
    from rollalloc.train.trainer import build_task

    task_config = {"num_train": 96, "num_eval": 32, "terms": [2, 3]}
    full = small_config(task_config=task_config, max_steps=2)
    cut = small_config(task_config=task_config, max_steps=2, pool_size=40)
    full_task = build_task(full)
    parts = build_parts(cut, log=None)
    prompts = parts.task.train["prompt"]
    assert len(prompts) == 40 and len(set(prompts)) == len(
        set(prompts) & set(full_task.train["prompt"])
    )
    order = [full_task.train["prompt"].index(p) for p in prompts]
    assert order == sorted(order)  # the pool's order kept
    assert parts.task.eval == full_task.eval
    assert build_parts(cut, log=None).task.train == parts.task.train  # the same subset again
    assert (
        prepare_policy(cut, full_task, log=None)[0] == prepare_policy(full, full_task, log=None)[0]
    )
    train(cut, parts=parts, log=lambda *_: None)
    run_json = json.loads(open(f"{cut.out}/run.json").read())
    saved = run_json["config"]
    assert saved["pool_size"] == 40
    assert 0 < run_json["concentration"]["prompts_seen"] <= 40  # how it spread its rollouts
    assert run_pool(saved).train == parts.task.train  # what a report rebuilds is what was trained
    both = small_config(task_config=task_config, max_steps=2, pool_levels=["3x1d"], pool_size=10)
    assert set(build_parts(both, log=None).task.train["level"]) == {"3x1d"}
    with pytest.raises(ValueError, match=r"pool_size 97 exceeds the 96 pool prompts"):
        check_task(small_config(task_config=task_config, max_steps=2, pool_size=97), full_task)
    with pytest.raises(ValueError, match="pool_size must be an integer >= 1"):
        small_config(max_steps=2, pool_size=0)
    # pool_seed draws another part of the same pool from the same warm start; run_pool rebuilds it
    other = small_config(task_config=task_config, max_steps=2, pool_size=40, pool_seed=7)
    other_task = build_parts(other, log=None).task
    assert len(other_task.train["prompt"]) == 40
    assert set(other_task.train["prompt"]) != set(prompts)
    assert set(other_task.train["prompt"]) <= set(full_task.train["prompt"])
    assert other_task.eval == full_task.eval
    assert (
        prepare_policy(other, full_task, log=None)[0]
        == prepare_policy(full, full_task, log=None)[0]
    )
    assert run_pool({**saved, "pool_seed": 7}).train == other_task.train
    same = small_config(task_config=task_config, max_steps=2, pool_size=40, pool_seed=cut.data_seed)
    assert build_parts(same, log=None).task.train == parts.task.train  # None means data_seed
    with pytest.raises(ValueError, match="pool_seed needs pool_size"):
        small_config(max_steps=2, pool_seed=3)
    with pytest.raises(ValueError, match="pool_seed must be an integer >= 0"):
        small_config(max_steps=2, pool_size=10, pool_seed=-1)


def test_pool_pick_mid_trains_on_the_prompts_nearest_one_half(small_config):
    """pool_pick='mid' keeps the pool_size prompts whose exact pass rate under the warm-started
    policy is nearest 1/2 (exact_pass_rates, itself checked against sampling in
    test_real_oracle.py): every kept prompt is at least as near 1/2 as every dropped one, in the
    pool's order; run.json lists them and run_pool rebuilds the part from that list only; bad
    combinations fail before any work, naming the option."""
    from rollalloc.tasks import run_pool
    from rollalloc.train.evaluator import exact_pass_rates
    from rollalloc.train.trainer import build_task, load_policy

    task_config = {"num_train": 96, "num_eval": 32, "terms": [2, 3]}
    cfg = small_config(task_config=task_config, max_steps=1, pool_size=12, pool_pick="mid")
    full = build_task(cfg)
    model, tok = load_policy(prepare_policy(cfg, full, log=None)[0])
    col = full.train
    p = exact_pass_rates(model, tok, list(col["prompt"]), list(col["answer"]), temperature=1.0)
    parts = build_parts(cfg, log=None)
    kept = parts.pool_part
    assert len(kept) == 12 and kept == sorted(kept)
    dropped = sorted(set(range(96)) - set(kept))
    assert np.abs(p[kept] - 0.5).max() <= np.abs(p[dropped] - 0.5).min()
    assert np.abs(p[kept] - 0.5).mean() < np.abs(p - 0.5).mean()  # not the pool's average
    assert parts.task.train["prompt"] == [col["prompt"][i] for i in kept]
    train(cfg, parts=parts, log=lambda *_: None)
    run_json = json.loads(open(f"{cfg.out}/run.json").read())
    assert run_json["pool_part"] == kept
    assert run_pool(run_json["config"], run_json["pool_part"]).train == parts.task.train
    with pytest.raises(ValueError, match="pool_part"):
        run_pool(run_json["config"])
    for bad, match in (
        ({"pool_pick": "mid"}, "pool_pick='mid' needs pool_size"),
        ({"pool_pick": "mid", "pool_size": 8, "pool_seed": 1}, "no pool_seed"),
        ({"pool_pick": "best", "pool_size": 8}, "pool_pick must be one of"),
    ):
        with pytest.raises(ValueError, match=match):
            small_config(max_steps=1, **bad)


def test_pool_pick_mid_level_keeps_each_levels_share(small_config):
    """pool_pick='mid-level': within each level the prompts nearest 1/2, every level holding its
    share of the pool. Expected counts come from the shares themselves (each within one of
    share x size, summing to size), nearness from exact_pass_rates per level."""
    from types import SimpleNamespace

    from rollalloc.tasks import share_quota
    from rollalloc.train.evaluator import exact_pass_rates
    from rollalloc.train.preflight import check_task
    from rollalloc.train.trainer import build_task, load_policy

    task_config = {"num_train": 90, "num_eval": 32, "terms": [2, 3, 4], "weights": [1, 2, 3]}
    cfg = small_config(task_config=task_config, max_steps=1, pool_size=20, pool_pick="mid-level")
    full = build_task(cfg)
    model, tok = load_policy(prepare_policy(cfg, full, log=None)[0])
    col = full.train
    p = exact_pass_rates(model, tok, list(col["prompt"]), list(col["answer"]), temperature=1.0)
    for column in ("level", "answer"):
        kept = build_parts(replace(cfg, pool_pick=f"mid-{column}"), log=None).pool_part
        assert len(kept) == 20 and kept == sorted(kept)
        values = np.asarray(col[column])
        for v in set(col[column]):
            mine = np.flatnonzero(values == v)
            k = [i for i in kept if values[i] == v]
            assert abs(len(k) - 20 * len(mine) / 90) < 1
            rest = sorted(set(mine) - set(k))
            if k and rest:
                assert np.abs(p[k] - 0.5).max() <= np.abs(p[rest] - 0.5).min()
    # largest remainders (Hamilton) are the apportionment nearest the shares in summed absolute
    # error: brute force over every split of `size` among the levels
    import itertools

    for counts, size in (
        ([5, 3, 2], 4),
        ([7, 7, 1], 5),
        ([1, 1, 1], 2),
        ([10, 30], 7),
        ([3, 9, 4], 11),
    ):
        tags = [c for c, n in zip("abc", counts) for _ in range(n)]
        share = [size * n / sum(counts) for n in counts]
        got = share_quota(tags, size)
        splits = [
            s for s in itertools.product(range(size + 1), repeat=len(counts)) if sum(s) == size
        ]
        best = min(sum(abs(a - b) for a, b in zip(s, share)) for s in splits)
        assert sum(got.values()) == size
        assert sum(abs(got[c] - b) for c, b in zip("abc", share)) == pytest.approx(best)
    # exact ties (remainders 1/3 each) go to the value seen first, not to float rounding
    assert share_quota(["b"] * 4 + ["a"] + ["c"] * 4, 3) == {"a": 0, "b": 2, "c": 1}
    with pytest.raises(ValueError, match="size 5 must lie in"):
        share_quota(["x"] * 3, 5)
    with pytest.raises(ValueError, match="pool_pick='mid-level' needs pool_size"):
        small_config(max_steps=1, pool_pick="mid-level")
    flat = SimpleNamespace(name="flat", answer_is_completion=True, train={"prompt": ["1+1="]})
    with pytest.raises(ValueError, match="has no `level` column"):
        check_task(cfg, flat)
    with pytest.raises(ValueError, match="has no `answer` column"):
        check_task(replace(cfg, pool_pick="mid-answer"), flat)
    opaque = SimpleNamespace(name="opaque", answer_is_completion=False, train=col)
    with pytest.raises(ValueError, match="needs exact pass rates"):
        check_task(cfg, opaque)


def test_log_groups_records_the_trained_groups_and_changes_nothing(
    small_config, tmp_path, monkeypatch
):
    # Pilot-Commit trains only part of what it generates (pilots are dropped), so the trained
    # groups are not the generated ones; the batches the learner receives are the reference
    from rollalloc.train.learner import GRPOLearner

    opts = {"strategy": "pilot-commit", "strategy_config": PER_STRATEGY["pilot-commit"]}
    plain = small_config(max_steps=4, out=str(tmp_path / "plain"), **opts)
    logged = small_config(max_steps=4, out=str(tmp_path / "logged"), log_groups=True, **opts)
    train(plain, log=lambda *_: None)
    seen, original = [], GRPOLearner.update

    def spy(self, batch):
        seen.append([(int(p), [float(x) for x in r]) for p, _, r in batch.groups()])
        return original(self, batch)

    monkeypatch.setattr(GRPOLearner, "update", spy)
    train(logged, log=lambda *_: None)
    a, b = _read(tmp_path / "plain/steps.jsonl"), _read(tmp_path / "logged/steps.jsonl")
    assert _strip(a) == [{k: v for k, v in r.items() if k != "trained"} for r in _strip(b)]
    assert all("trained" not in r for r in a)
    assert len(seen) == len(b) == 4
    for r, groups in zip(b, seen, strict=True):
        t = r["trained"]
        assert t["prompt_ids"] == [p for p, _ in groups]
        assert t["group_sizes"] == [len(x) for _, x in groups]
        assert t["mean_reward"] == pytest.approx([np.mean(x) for _, x in groups])
        assert t["success_rate"] == pytest.approx([np.mean(x) for _, x in groups])  # 0/1 rewards
        assert t["varies"] == [len(set(x)) > 1 for _, x in groups]
        assert sum(t["group_sizes"]) == r["trained_rollouts"] and len(groups) == r["groups"]


def test_log_pass_rates_saves_the_policy_that_generated_each_step_and_changes_nothing(
    small_config, tmp_path, monkeypatch
):
    # the reference: the exact pass rates of the very model object the sampler generates with,
    # read (by a spy on the sampler) when each step's rollouts are drawn; exact_pass_rates itself
    # is checked against Monte Carlo in test_exact_eval.py
    from rollalloc.train.evaluator import exact_pass_rates
    from rollalloc.train.sampler import Sampler

    plain = small_config(max_steps=5, out=str(tmp_path / "plain"))
    logged = small_config(max_steps=5, out=str(tmp_path / "logged"), log_pass_rates_every=2)
    train(plain, log=lambda *_: None)
    seen, original = [], Sampler.generate

    def spy(self, *a, **k):
        col = self.task.train
        model = self.generator.model
        seen.append(
            exact_pass_rates(
                model, self.generator.tokenizer, list(col["prompt"]), list(col["answer"]),
                temperature=self.temperature,
            )
        )  # fmt: skip
        return original(self, *a, **k)

    monkeypatch.setattr(Sampler, "generate", spy)
    train(logged, log=lambda *_: None)
    a, b = _read(tmp_path / "plain/steps.jsonl"), _read(tmp_path / "logged/steps.jsonl")
    assert _strip(a) == _strip(b)  # the log draws no random numbers and moves nothing
    files = sorted(p.name for p in (tmp_path / "logged/pass_rates").iterdir())
    assert files == ["step000000.npy", "step000002.npy", "step000004.npy"]
    assert len(seen) == 5
    for step in (0, 2, 4):
        got = np.load(tmp_path / f"logged/pass_rates/step{step:06d}.npy")
        assert got.dtype == np.float32 and got.shape == (len(seen[step]),)
        np.testing.assert_allclose(got, seen[step], rtol=1e-5, atol=1e-6)
    assert not np.allclose(seen[0], seen[4])  # the policy moved: the timing is tested


def test_log_pass_rates_on_a_cut_pool_and_after_an_attempt_without_checkpoint(
    small_config, tmp_path
):
    # pool_levels: the vectors are the cut pool's, in its prompt-id order (the order of the trace);
    # a run that starts again from nothing (no checkpoint) drops the earlier attempt's snapshots
    from rollalloc.train.evaluator import exact_pass_rates

    task_config = {"num_train": 96, "num_eval": 32, "terms": [2, 3]}
    out = tmp_path / "cut"
    cfg = small_config(
        task_config=task_config, pool_levels=["3x1d"], max_steps=3, log_pass_rates_every=2,
        out=str(out),
    )  # fmt: skip
    (out / "pass_rates").mkdir(parents=True)
    (out / "pass_rates/step000099.npy").write_bytes(b"an earlier attempt's")
    (out / "steps.jsonl").write_text('{"step": 0}\n')  # a crash before the first checkpoint
    parts = build_parts(cfg, log=None)
    col = parts.task.train
    p0 = exact_pass_rates(
        parts.model, parts.tokenizer, list(col["prompt"]), list(col["answer"]), temperature=1.0
    )  # the warm start's policy
    train(cfg, resume=True, log=lambda *_: None)
    assert sorted(f.name for f in (out / "pass_rates").iterdir()) == [
        "step000000.npy",
        "step000002.npy",
    ]
    got = np.load(out / "pass_rates/step000000.npy")
    assert len(got) == parts.task.num_train < 96
    np.testing.assert_allclose(got, p0, rtol=1e-5, atol=1e-6)


def test_log_pass_rates_needs_an_exact_answer_task(small_config):
    from rollalloc.train.preflight import check_task

    class Sampled:
        name, num_train, answer_is_completion = "sampled-only", 8, False
        train = {"prompt": ["1+1="] * 8}

    with pytest.raises(ValueError, match="log_pass_rates_every=4 .* task sampled-only is not"):
        check_task(small_config(max_steps=2, log_pass_rates_every=4), Sampled())
    with pytest.raises(ValueError, match="log_pass_rates_every must be an integer >= 0"):
        train(small_config(max_steps=2, log_pass_rates_every=-1))


def test_a_strategy_that_gives_up_ends_the_run_with_its_reason(small_config, tmp_path):
    # PoolExhaustedError / MaxRoundsError are a strategy's defined stop (as in the simulator):
    # the run keeps its steps, gets a final evaluation and says why; any other error still raises
    from rollalloc.allocator import PoolExhaustedError

    def stopping_after(parts, steps, error):
        ask = parts.allocator.ask

        def give_up():
            if len(_read(parts_out / "steps.jsonl")) >= steps:
                raise error
            return ask()

        parts.allocator.ask = give_up
        return parts

    cfg = small_config(max_steps=6, out=str(tmp_path / "stop"))
    parts_out = tmp_path / "stop"
    parts = stopping_after(build_parts(cfg, log=None), 2, PoolExhaustedError("all evicted"))
    summary = train(cfg, parts=parts, log=lambda *_: None)
    run = json.loads((parts_out / "run.json").read_text())
    assert summary["steps"] == run["steps"] == 2 == len(_read(parts_out / "steps.jsonl"))
    assert run["stopped"].startswith("stopped at step 2 after")
    assert "PoolExhaustedError: all evicted" in run["stopped"]
    evals = _read(parts_out / "evals.jsonl")
    assert evals[-1]["step"] == 2 and run["final_eval"] == evals[-1]
    assert evals[-1]["cum_rollouts"] == parts.allocator.cum_rollouts

    cfg = small_config(max_steps=6, out=str(tmp_path / "fail"))
    parts_out = tmp_path / "fail"
    parts = stopping_after(build_parts(cfg, log=None), 1, RuntimeError("a bug"))
    with pytest.raises(RuntimeError, match="a bug"):
        train(cfg, parts=parts, log=lambda *_: None)
    assert not (parts_out / "run.json").exists()


def test_strata_come_from_the_task_column_and_a_missing_column_fails_first(small_config):
    """posterior-signal with strata=level: build_parts hands the task's level column to the
    allocator (one group per level of the pool); a column the task lacks fails in check_task,
    before the warm start, naming the task's columns."""
    from rollalloc.train.preflight import check_task
    from rollalloc.train.trainer import build_task

    task_config = {"num_train": 96, "num_eval": 32, "terms": [2, 3, 4]}
    opts = {"strategy": "posterior-signal", "task_config": task_config, "max_steps": 1}
    cfg = small_config(strategy_config={"strata": "level"}, **opts)
    task = build_task(cfg)
    parts = build_parts(cfg, log=None)
    got = {
        lv: set(parts.allocator.stratum[[i for i, v in enumerate(task.train["level"]) if v == lv]])
        for lv in set(task.train["level"])
    }
    assert sorted(len(v) for v in got.values()) == [1, 1, 1]  # each level one group
    assert len(set().union(*got.values())) == 3  # and the groups differ
    bad = small_config(strategy_config={"strata": "difficulty"}, **opts)
    with pytest.raises(
        ValueError,
        match=r"column 'difficulty' \(pool_columns\) is not a column of task arith.*'level'",
    ):
        check_task(bad, task)
