"""RollallocRayPPOTrainer end to end on a CPU: verl's real trainer code, config, advantages, metrics,
logger and checkpoint files; fakes only for the GPU workers (rollout servers, FSDP actor)."""

import json
import os

import numpy as np
import pytest
from verl_fakes import build_trainer

PC = [
    "data.train_batch_size=4",
    "actor_rollout_ref.rollout.n=6",
    "actor_rollout_ref.rollout.agent.num_workers=1",
    "rollalloc.strategy=pilot-commit",
    "rollalloc.pilot_commit.n_pilot=2",
    "rollalloc.pilot_commit.n_commit=4",
    "rollalloc.pilot_commit.gen_prompts=8",
]


def _log(path):
    return [json.loads(line)["data"] for line in open(path).read().splitlines()]


def test_pilot_commit_trains_in_verl(tmp_path, monkeypatch):
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(tmp_path / "log.jsonl"))
    t = build_trainer(tmp_path, [*PC, "trainer.total_training_steps=6", "trainer.save_freq=-1"])
    t.fit()
    assert [u["step"] for u in t.updates_seen] == [1, 2, 3, 4, 5, 6]
    for u in t.updates_seen:  # constant batch: 4 groups of n_pilot + n_commit under one uid each
        assert u["rows"] == 24 and len(set(u["uids"])) == 4
        assert all(u["uids"].count(x) == 6 for x in set(u["uids"]))
    # every generated rollout is accounted: the fake generator saw exactly what the allocator counts
    assert sum(c["rows"] for c in t.async_rollout_manager.calls) == t.allocator.cum_rollouts
    log = _log(tmp_path / "log.jsonl")
    assert len(log) == 6
    for key in (
        "rollalloc/rollouts_by_phase/pilot",
        "rollalloc/rollouts_by_phase/commit",
        "rollalloc/effective_prompt_ratio",
        "rollalloc/buffer_size",
        "rollalloc/cum_rollouts",
        "rollalloc/decisions/kept",
        "critic/advantages/mean",
    ):
        assert key in log[-1], key
    assert log[-1]["rollalloc/cum_rollouts"] == t.allocator.cum_rollouts
    assert (
        sum(row.get("rollalloc/decisions/evicted", 0) for row in log) > 0
    )  # always-solved prompts
    # Pilot-Commit's filter keeps mixed groups: nearly every trained group has a gradient signal,
    # and the fake policy learns from it
    assert np.mean([row["rollalloc/effective_prompt_ratio"] for row in log]) >= 0.9
    assert all(u["signal"] > 0 for u in t.updates_seen)
    assert t.policy.skill > 0.5


def test_no_prompt_is_trained_twice_in_one_step(tmp_path, monkeypatch):
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(tmp_path / "log.jsonl"))
    t = build_trainer(tmp_path, [*PC, "trainer.total_training_steps=6", "trainer.save_freq=-1"])
    t.fit()
    for u in t.updates_seen:
        prompts = [uid.split(":")[2] for uid in dict.fromkeys(u["uids"])]
        assert len(prompts) == len(set(prompts)), f"step {u['step']}: {prompts}"


def test_resume_continues_identically(tmp_path, monkeypatch):
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(tmp_path / "log.jsonl"))
    whole = build_trainer(
        tmp_path / "a", [*PC, "trainer.total_training_steps=6", "trainer.save_freq=-1"]
    )
    whole.fit()

    first = build_trainer(
        tmp_path / "b", [*PC, "trainer.total_training_steps=3", "trainer.save_freq=3"]
    )
    first.fit()
    ckpt = tmp_path / "b" / "ckpt" / "global_step_3"
    assert (ckpt / "rollalloc" / "allocator.npz").is_file() and (
        ckpt / "actor" / "fake_policy.json"
    ).is_file()
    meta = json.loads((ckpt / "rollalloc" / "meta.json").read_text())
    assert meta["live_handles"] > 0  # buffered pilot rollouts went into the checkpoint

    resumed = build_trainer(
        tmp_path / "b", [*PC, "trainer.total_training_steps=6", "trainer.save_freq=-1"]
    )
    resumed.fit()  # trainer.resume_mode=auto: verl finds global_step_3, we restore allocator + store
    assert [u["step"] for u in resumed.updates_seen] == [4, 5, 6]
    for a, b in zip(whole.updates_seen[3:], resumed.updates_seen):
        assert a["uids"] == b["uids"]
        np.testing.assert_allclose(a["advantages"], b["advantages"])
    sa, sb = whole.allocator.state_dict(), resumed.allocator.state_dict()
    assert sa["cum_by_phase"] == sb["cum_by_phase"] and sa["step"] == sb["step"]
    np.testing.assert_array_equal(sa["live"], sb["live"])
    assert whole.policy.skill == pytest.approx(resumed.policy.skill)


def test_resume_from_a_checkpoint_without_allocator_state_fails(tmp_path, monkeypatch):
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(tmp_path / "log.jsonl"))
    plain = build_trainer(
        tmp_path,
        [
            *PC,
            "trainer.total_training_steps=2",
            "trainer.save_freq=2",
            "rollalloc.checkpoint=false",
        ],
    )
    plain.fit()
    again = build_trainer(tmp_path, [*PC, "trainer.total_training_steps=4"])
    with pytest.raises(FileNotFoundError, match="has no rollalloc state"):
        again.fit()


@pytest.mark.parametrize(
    "strategy,extra",
    [
        ("grpo", []),
        ("dapo", ["rollalloc.dapo.gen_prompts=8"]),
        ("posterior-signal", ["rollalloc.posterior_signal.select=top"]),  # the overlay's section
        ("likelihood-rank", ["rollalloc.likelihood_rank.probe=1"]),  # a look round, then commits
    ],
)
def test_other_strategies_run(tmp_path, monkeypatch, strategy, extra):
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(tmp_path / "log.jsonl"))
    t = build_trainer(
        tmp_path,
        [
            "data.train_batch_size=4",
            "actor_rollout_ref.rollout.n=4",
            "actor_rollout_ref.rollout.agent.num_workers=3",  # ragged totals padded for the agent loop
            f"rollalloc.strategy={strategy}",
            "trainer.total_training_steps=3",
            "trainer.save_freq=-1",
            *extra,
        ],
    )
    t.fit()
    assert all(u["rows"] == 16 and len(set(u["uids"])) == 4 for u in t.updates_seen)
    generated = sum(c["rows"] for c in t.async_rollout_manager.calls)
    assert generated >= t.allocator.cum_rollouts and all(
        c["rows"] % 3 == 0 for c in t.async_rollout_manager.calls
    )
    log = _log(tmp_path / "log.jsonl")
    assert log[-1]["rollalloc/cum_rollouts"] == t.allocator.cum_rollouts
    if strategy == "dapo":  # dynamic sampling trains only groups with signal
        assert all(row["rollalloc/effective_prompt_ratio"] == 1.0 for row in log)


def test_likelihood_rank_with_level_quotas_reads_extra_info_and_counts_the_trained_groups(
    tmp_path, monkeypatch
):
    """The paper testbed's configuration with a look (lrQFP1) through verl unchanged: the level
    column comes from extra_info, every update is a constant batch, and each level's f_g (the EMA
    of its trained groups with variance) is 0.95^m after m flat groups, 1 after m varied ones, in
    between otherwise (an order-free restatement; flat: every advantage of the uid is 0)."""
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(tmp_path / "log.jsonl"))
    lr = "rollalloc.likelihood_rank"
    t = build_trainer(
        tmp_path,
        [
            "data.train_batch_size=4",
            "actor_rollout_ref.rollout.n=4",
            "rollalloc.strategy=likelihood-rank",
            "trainer.total_training_steps=6",
            "trainer.save_freq=-1",
            f"{lr}.strata=extra_info.level",
            f"{lr}.quota=true",
            f"{lr}.fill=true",
            f"{lr}.window=4",
            f"{lr}.probe=1",
        ],
    )
    t.fit()
    assert all(u["rows"] == 16 and len(set(u["uids"])) == 4 for u in t.updates_seen)
    levels = t.train_dataset.level
    names = sorted(set(levels))
    assert [names[g] for g in t.allocator.group] == list(levels)
    trained = {v: [0, 0] for v in names}  # level: [groups, groups with variance]
    for u in t.updates_seen:
        uids = np.asarray(u["uids"])
        for uid in set(u["uids"]):
            level = levels[int(uid.split(":")[-1])]
            trained[level][0] += 1
            trained[level][1] += int(np.any(np.asarray(u["advantages"])[uids == uid] != 0))
    assert sum(m for m, _ in trained.values()) == 24
    for v, (m, varied) in trained.items():
        f = t.allocator._vary[names.index(v)]
        if varied == 0:
            assert f == pytest.approx(0.95**m), (v, m)
        elif varied == m:
            assert f == pytest.approx(1.0), (v, m)
        else:
            assert 0.95**m < f < 1.0, (v, m, varied, f)


def test_config_errors_name_the_fix(tmp_path):
    with pytest.raises(ValueError, match=r"set actor_rollout_ref.rollout.n=6"):
        build_trainer(tmp_path, [*PC[:1], "actor_rollout_ref.rollout.n=8", *PC[2:]])
    speed = [  # screen 2 + continuation 4: groups of 6
        "data.train_batch_size=4",
        "actor_rollout_ref.rollout.n=8",
        "rollalloc.strategy=speed-rl",
        "+rollalloc.speed_rl.n_screen=2",
        "+rollalloc.speed_rl.n_continue=4",
    ]
    with pytest.raises(ValueError, match=r"speed-rl trains groups of 6 .*rollout.n=6"):
        build_trainer(tmp_path, speed)
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['n_pilots'\]"):
        build_trainer(tmp_path, [*PC, "+rollalloc.pilot_commit.n_pilots=3"])
    with pytest.raises(
        ValueError, match="rollalloc.train_prompts=8 differs from data.train_batch_size=4"
    ):
        build_trainer(tmp_path, [*PC, "rollalloc.train_prompts=8"])


def test_launcher_config_and_runner(tmp_path):
    """The Hydra overlay composes on verl's config and the Ray task runner swaps in our trainer."""
    from verl.trainer import main_ppo_v0
    from verl_fakes import compose_config

    from rollalloc.integrations.verl import main as launcher

    cfg = compose_config(
        ["rollalloc.pilot_commit.n_pilot=32", "rollalloc.pilot_commit.n_commit=96"]
    )
    assert cfg.trainer.use_v1 is False and cfg.rollalloc.strategy == "pilot-commit"
    assert (
        cfg.rollalloc.pilot_commit.n_pilot == 32 and "actor_rollout_ref" in cfg
    )  # verl's config is all there
    runner = launcher._make_task_runner()
    plain = launcher._unwrap(runner)
    assert issubclass(plain, launcher._unwrap(main_ppo_v0.TaskRunner))
    assert plain.run is not launcher._unwrap(main_ppo_v0.TaskRunner).run
    assert os.path.isfile(os.path.join(launcher.CONFIG_DIR, "rollalloc_trainer.yaml"))
