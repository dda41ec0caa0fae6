"""TRL integration: RollallocGRPOTrainer trains a tiny Qwen2 through TRL's own GRPOTrainer code.

Every test builds the model from a config (no hub download) and runs a few real TRL steps on CPU.
The reward is a real verifier of the model's text: 1 if the completion starts with one of the
prompt's target characters. Target sets of different sizes give a random policy per-prompt success
rates from ~0.1 to ~0.9, so the filters of dapo / pilot-commit have something to decide, and the
policy can learn (starting every completion with a digit satisfies every prompt).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("trl", reason="trl is not installed: pip install 'rollalloc[trl]'")
datasets = pytest.importorskip(
    "datasets", reason="the `datasets` package (a trl dependency) is missing"
)

import torch  # noqa: E402
from trl import GRPOConfig  # noqa: E402

from rollalloc.allocator import available_strategies, get_strategy, make_allocator  # noqa: E402
from rollalloc.integrations import allocator_batch_shape  # noqa: E402
from rollalloc.integrations.trl import (  # noqa: E402
    RollallocGRPOTrainer,
    RolloutStore,
    StoredRollout,
)
from rollalloc.state import load_state  # noqa: E402
from rollalloc.train.model import CHARS, TinyModelConfig, make_char_tokenizer, make_tiny_model  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")

POOL = 256  # large enough that no epoch boundary (which clears the PC buffer) falls in a test run
TRAIN_PROMPTS = 4
GROUP = 4  # num_generations; pilot-commit: n_pilot 2 + n_commit 2

STRATEGIES = {
    "grpo": dict(n=GROUP),
    "dapo": dict(n=GROUP, max_rounds=20),
    "pilot-commit": dict(n_pilot=2, n_commit=2, max_rounds=20),
    "cero": dict(fixed_batch=True, n_max=GROUP),
    "mopps": dict(n=GROUP),
    "greso": dict(n=GROUP, max_rounds=20),
    "speed-rl": dict(n_screen=2, n_continue=2, max_rounds=20),
    # the one mapping's constant-batch options, with probes of 2 so that they are exercised
    "posterior-signal": get_strategy("posterior-signal").Config.options_for_group_size(
        GROUP, train_prompts=None, constant_batch=True, n_probe=2, probe_if_cheaper=False
    ),
    "likelihood-rank": dict(n=GROUP, probe=2, window=2.0),  # a look round, then commits
}


def make_dataset(seed: int = 0):
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(POOL):
        a, b = rng.integers(0, 10, size=2)
        width = 10 + 80 * (i % 8) // 7  # target set: the first 10 .. 90 characters of the alphabet
        rows.append({"prompt": f"{a}+{b}=", "target": CHARS[:width]})
    return datasets.Dataset.from_list(rows)


class CountingReward:
    """starts_with_target, counting every completion it scores (= rollouts TRL generated)."""

    __name__ = "starts_with_target"

    def __init__(self) -> None:
        self.scored = 0

    def __call__(self, completions, target, **_):
        self.scored += len(completions)
        return [1.0 if c[:1] and c[0] in t else 0.0 for c, t in zip(completions, target)]


class RecordingTrainer(RollallocGRPOTrainer):
    """Keeps every TrainBatch next to the tensors TRL built from it (before TRL shuffles them)."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.records = []

    def _run_allocator_step(self):
        batch = super()._run_allocator_step()
        self.records.append({"batch": batch, "rollouts": self.rollout_store.get(batch.handles)})
        return batch

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        if self.model.training:
            self.records[-1]["output"] = {
                k: v for k, v in out.items() if isinstance(v, torch.Tensor)
            }
        return out


def make_trainer(
    strategy,
    tmp_path,
    *,
    max_steps=3,
    save_steps=None,
    seed=0,
    cls=RecordingTrainer,
    extra_rewards=(),
    **kw,
):
    if strategy not in available_strategies():
        pytest.skip(f"strategy {strategy!r} is not registered in rollalloc yet")
    tok = make_char_tokenizer()
    model = make_tiny_model(
        len(tok),
        TinyModelConfig(
            hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_positions=32
        ),
    )
    ds = make_dataset()
    allocator = make_allocator(
        strategy,
        num_prompts=len(ds),
        seed=seed,
        train_prompts=TRAIN_PROMPTS,
        **STRATEGIES[strategy],
    )
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=TRAIN_PROMPTS * GROUP // 2,
        gradient_accumulation_steps=2,  # steps_per_generation = 2: one generation per optimizer step
        num_generations=GROUP,
        max_completion_length=3,
        max_steps=max_steps,
        learning_rate=3e-3,
        beta=0.0,
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        seed=seed,
        save_strategy="steps" if save_steps else "no",
        save_steps=save_steps or 500,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    reward = CountingReward()
    trainer = cls(
        model=model,
        reward_funcs=[reward, *extra_rewards],
        args=args,
        train_dataset=ds,
        processing_class=tok,
        allocator=allocator,
        **kw,
    )
    return trainer, reward


def train_logs(trainer):
    return [h for h in trainer.state.log_history if "loss" in h]


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_trains_through_trl_with_exact_accounting(strategy, tmp_path):
    trainer, reward = make_trainer(strategy, tmp_path)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    allocator = trainer.allocator

    logs = train_logs(trainer)
    assert len(logs) == 3 and all(math.isfinite(h["loss"]) for h in logs)
    for name, p in trainer.model.named_parameters():
        assert not torch.equal(before[name], p.detach()), f"parameter {name} did not change"

    # every rollout TRL generated in training was told to the allocator exactly once
    assert reward.scored == trainer.rollouts_generated == allocator.cum_rollouts > 0
    assert allocator.step == trainer.state.global_step == 3
    assert logs[-1]["rollalloc/cum_rollouts"] == allocator.cum_rollouts
    assert len(trainer.rollout_store) == allocator.live_handles  # only buffered rollouts are kept

    for rec, log in zip(trainer.records, logs):
        batch, rollouts, out = rec["batch"], rec["rollouts"], rec["output"]
        assert batch.num_groups == TRAIN_PROMPTS and set(batch.group_sizes.tolist()) == {GROUP}
        # TRL trained exactly the allocator's rollouts, in group order
        for i, r in enumerate(rollouts):
            ids = out["completion_ids"][i][out["completion_mask"][i].bool()].tolist()
            assert ids == r.completion_ids
        rewards = torch.tensor(batch.rewards, dtype=torch.float32).view(-1, GROUP)  # (G, n)
        np.testing.assert_array_equal([r.rewards_per_func[0] for r in rollouts], batch.rewards)
        # TRL's advantages are the grouped advantages of rollalloc's groups (plain loop reference)
        expected = []
        for g in rewards:
            std = g.std(unbiased=True) if len(g) > 1 else torch.tensor(0.0)
            expected.append((g - g.mean()) / (std + 1e-4))
        torch.testing.assert_close(out["advantages"], torch.cat(expected), rtol=1e-5, atol=1e-5)
        # TRL's own group statistics agree with rollalloc's
        assert log["frac_reward_zero_std"] == pytest.approx(1 - batch.stats.effective_prompt_ratio)
        assert log["reward"] == pytest.approx(float(batch.rewards.mean()), abs=1e-6)
        assert log["rollalloc/rollouts"] == batch.stats.rollouts

    if strategy == "pilot-commit":
        phases = {k for h in logs for k in h if k.startswith("rollalloc/rollouts/")}
        assert phases == {"rollalloc/rollouts/pilot", "rollalloc/rollouts/commit"}
        # a trained group mixes rollouts of an earlier step's pilot and this step's commit
        versions = [
            {r.policy_version for r in rec["rollouts"][g * GROUP : (g + 1) * GROUP]}
            for rec in trainer.records
            for g in range(TRAIN_PROMPTS)
        ]
        assert any(len(v) > 1 for v in versions), "no buffered pilot was trained in a later step"


def test_resume_from_trl_checkpoint_continues_allocator(tmp_path):
    full, _ = make_trainer("pilot-commit", tmp_path / "a", max_steps=4, save_steps=2)
    full.train()
    ckpt = tmp_path / "a" / "out" / "checkpoint-2"
    saved = load_state(ckpt / "rollalloc" / "allocator.npz")
    stored = RolloutStore.load(str(ckpt / "rollalloc"))
    assert saved["step"] == 2 and len(saved["live"]) > 0, (
        "checkpoint holds no buffered pilot to carry over"
    )
    assert sorted(saved["live"].tolist()) == stored.live_handles().tolist()

    resumed, reward = make_trainer("pilot-commit", tmp_path / "b", max_steps=4, save_steps=2)
    shutil.copytree(ckpt, tmp_path / "b" / "out" / "checkpoint-2")
    resumed.train(resume_from_checkpoint=str(tmp_path / "b" / "out" / "checkpoint-2"))

    meta = json.loads((ckpt / "rollalloc" / "meta.json").read_text())
    assert resumed.allocator.step == 4
    # the resumed run generated only steps 3-4 and continued the saved totals
    assert resumed.rollouts_generated == meta["rollouts_generated"] + reward.scored
    assert resumed.allocator.cum_rollouts == resumed.rollouts_generated
    # the pilots buffered at the checkpoint were trained or released by the resumed run, not lost
    trained = np.concatenate([r["batch"].handles for r in resumed.records])
    released = np.concatenate([r["batch"].released for r in resumed.records])
    carried = set(saved["live"].tolist())
    assert carried <= set(trained.tolist()) | set(released.tolist()) | set(
        resumed.rollout_store.live_handles().tolist()
    )
    assert carried & set(trained.tolist()), (
        "no buffered pilot from the checkpoint was trained after resume"
    )
    # same seeds, same checkpoint: the continuation is the uninterrupted run
    assert_same_state(full.allocator.state_dict(), resumed.allocator.state_dict())


def assert_same_state(a, b, path="state"):
    if isinstance(a, dict):
        assert set(a) == set(b), path
        for k in a:
            assert_same_state(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b, err_msg=path)
    else:
        assert a == b, path


def test_resume_from_checkpoint_without_allocator_state_raises(tmp_path):
    trainer, _ = make_trainer("grpo", tmp_path, max_steps=1, save_steps=1)
    trainer.train()
    ckpt = tmp_path / "out" / "checkpoint-1"
    shutil.rmtree(ckpt / "rollalloc")
    again, reward = make_trainer("grpo", tmp_path, max_steps=2, save_steps=1)
    with pytest.raises(FileNotFoundError, match="no rollalloc/ folder"):
        again.train(resume_from_checkpoint=str(ckpt))
    assert reward.scored == 0


def build_for_checks(strategy, tmp_path, **options):
    """A trainer with num_generations=4 and 8 rollouts per generation batch around `strategy`
    (2 prompts a step): its construction runs the trainer's checks."""
    tok = make_char_tokenizer()
    ds = make_dataset()
    allocator = make_allocator(strategy, num_prompts=len(ds), train_prompts=2, **options)
    return allocator, lambda: RollallocGRPOTrainer(
        model=make_tiny_model(len(tok), TinyModelConfig(hidden_size=16, num_layers=1, num_heads=2)),
        reward_funcs=CountingReward(),
        args=GRPOConfig(
            output_dir=str(tmp_path),
            per_device_train_batch_size=8,
            num_generations=4,
            use_cpu=True,
            report_to=[],
        ),
        train_dataset=ds,
        processing_class=tok,
        allocator=allocator,
    )


def test_mismatched_group_size_is_rejected(tmp_path):
    _, build = build_for_checks("pilot-commit", tmp_path, n_pilot=2, n_commit=4)
    with pytest.raises(ValueError, match="num_generations=4"):
        build()


@pytest.mark.parametrize(
    "strategy, options",
    [("knapsack", {"n": 4}), ("posterior-signal", {"n": 4, "n_probe": 2})],  # trainer's options
)
def test_unequal_group_sizes_are_refused_before_training(strategy, options, tmp_path):
    """Knapsack-RL sizes groups by value, posterior-signal in its budget-exact mode shares the
    budget unequally: TRL would refuse their batches mid-run; the trainer refuses them at once."""
    allocator, build = build_for_checks(strategy, tmp_path, **options)
    assert not allocator.equal_group_sizes
    with pytest.raises(ValueError, match="groups of different sizes"):
        build()


@pytest.mark.parametrize(
    "strategy, options",
    [("grpo", {"n": 4, "small_every": 1}), ("cero", {"n_max": 4, "fixed_batch": False})],
)
def test_a_variable_batch_is_refused_before_training(strategy, options, tmp_path):
    allocator, build = build_for_checks(strategy, tmp_path, **options)
    assert not allocator.fixed_batch and allocator_batch_shape(allocator) is None
    with pytest.raises(ValueError, match="variable number of groups per step"):
        build()


def test_rewards_outside_the_allocator_range_name_allocator_reward(tmp_path):
    def bonus(completions, **_):
        return [0.5] * len(completions)

    # TRL's weighted sum (up to 1.5) leaves the allocator's [0, 1]: the error says what to set
    trainer, _ = make_trainer("grpo", tmp_path, max_steps=1, extra_rewards=[bonus])
    with pytest.raises(ValueError, match="allocator_reward"):
        trainer.train()
    assert len(trainer.rollout_store) == 0  # the rejected round's rollouts were not kept

    trainer, _ = make_trainer(
        "grpo",
        tmp_path / "2",
        max_steps=1,
        extra_rewards=[bonus],
        allocator_reward="starts_with_target",
    )
    trainer.train()
    batch, rollouts = trainer.records[0]["batch"], trainer.records[0]["rollouts"]
    np.testing.assert_array_equal(batch.rewards, [r.rewards_per_func[0] for r in rollouts])
    assert all(r.rewards_per_func[1] == 0.5 for r in rollouts)  # TRL still trains on both rewards

    with pytest.raises(ValueError, match="not one of the reward functions"):
        make_trainer("grpo", tmp_path / "3", extra_rewards=[bonus], allocator_reward="correct")


def test_rollout_store_round_trip(tmp_path):
    store = RolloutStore(num_reward_funcs=2)
    rollouts = [
        StoredRollout(3, [5, 6, 7], [8, 1], "8", np.array([1.0, np.nan], np.float32), 0),
        StoredRollout(
            9,
            [5],
            [4, 4, 1],
            [{"role": "assistant", "content": "44"}],
            np.array([0.0, 0.5], np.float32),
            2,
            tool_mask=[1, 0, 1],
            sampling_logps=[-0.1, float("nan"), -2.0],
            extra={"note": "x"},
        ),
        StoredRollout(9, [5], [], "", np.array([0.0, 0.0], np.float32), 2),
    ]
    handles = store.add(rollouts)
    store.release(handles[:1])
    store.save(str(tmp_path))
    loaded = RolloutStore.load(str(tmp_path))
    assert loaded.next_handle == 3 and loaded.live_handles().tolist() == [1, 2]
    for h, want in zip([1, 2], rollouts[1:]):
        (got,) = loaded.get(np.array([h]))
        assert (
            got.prompt_id,
            got.prompt_ids,
            got.completion_ids,
            got.completion,
            got.policy_version,
            got.extra,
        ) == (
            want.prompt_id,
            want.prompt_ids,
            want.completion_ids,
            want.completion,
            want.policy_version,
            want.extra,
        )
        np.testing.assert_array_equal(got.rewards_per_func, want.rewards_per_func)
        assert got.tool_mask == want.tool_mask
        if want.sampling_logps is None:
            assert got.sampling_logps is None
        else:
            np.testing.assert_array_equal(got.sampling_logps, want.sampling_logps)
    with pytest.raises(KeyError, match="not stored"):
        loaded.get(np.array([0]))
    assert not any(f.endswith(".pkl") for f in os.listdir(tmp_path))


def test_batch_shape_of_each_strategy():
    for strategy, cfg in STRATEGIES.items():
        if strategy not in available_strategies():
            continue
        alloc = make_allocator(strategy, num_prompts=POOL, train_prompts=TRAIN_PROMPTS, **cfg)
        assert allocator_batch_shape(alloc) == (TRAIN_PROMPTS, GROUP), strategy


@pytest.mark.parametrize("strategy", ["pilot-commit", "cero", "dapo"])
def test_example_config_passes_trls_checks(strategy, tmp_path):
    """examples/trl_pilot_commit.py by default: its allocator fits TRL's fixed batch (it used to
    fail after the warm start with on_max_rounds='train'); built without the warm start."""
    from rollalloc.integrations.trl.testbed import testbed_allocator

    path = Path(__file__).resolve().parents[2] / "examples" / "trl_pilot_commit.py"
    spec = importlib.util.spec_from_file_location("trl_pilot_commit", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    argv = [] if strategy == "pilot-commit" else ["--strategy", strategy]
    cfg, _ = example.parse_args(argv)
    assert cfg.strategy == strategy
    ds = make_dataset()
    allocator = testbed_allocator(cfg, len(ds))
    assert allocator.fixed_batch
    tok = make_char_tokenizer()
    RollallocGRPOTrainer(  # runs the trainer's checks: shape, constant batch, on_max_rounds
        model=make_tiny_model(len(tok), TinyModelConfig(hidden_size=16, num_layers=1, num_heads=2)),
        reward_funcs=CountingReward(),
        args=GRPOConfig(
            output_dir=str(tmp_path),
            per_device_train_batch_size=cfg.train_prompts * cfg.group_size,
            num_generations=cfg.group_size,
            use_cpu=True,
            report_to=[],
        ),
        train_dataset=ds,
        processing_class=tok,
        allocator=allocator,
    )


def test_testbed_trainer_trains_on_the_pool_levels_only(tmp_path):
    """integrations/trl/testbed.py cuts the pool as rollalloc's trainer does (pool_levels), after
    the warm start: TRL's dataset holds exactly the full task's prompts of that level."""
    import copy

    from rollalloc.integrations.trl.testbed import build_testbed_trainer
    from rollalloc.train.config import SMOKE_TESTBED, config_from_dict, merge
    from rollalloc.train.trainer import build_task

    d = merge(copy.deepcopy(SMOKE_TESTBED), {"cache_dir": str(tmp_path / "cache"), "max_steps": 1})
    d = merge(d, {"task_config": {"num_train": 96, "num_eval": 32, "terms": [2, 3]}})
    cfg = config_from_dict(merge(d, {"pool_levels": ["3x1d"], "threads": 1}))
    full = build_task(config_from_dict(d))
    want = [p for p, lv in zip(full.train["prompt"], full.train["level"]) if lv == "3x1d"]
    trainer, _ = build_testbed_trainer(
        cfg, output_dir=tmp_path / "out", budget_rollouts=64, log=lambda *_: None
    )
    assert list(trainer.train_dataset["prompt"]) == want
    mid = config_from_dict(merge(d, {"pool_size": 8, "pool_pick": "mid"}))
    with pytest.raises(ValueError, match="random parts only"):  # refused, not drawn at random
        build_testbed_trainer(mid, output_dir=tmp_path / "mid", budget_rollouts=64, log=None)


def _train_with_levels(monkeypatch, tmp_path, name, **options):
    """Train `name` through TRL on a dataset with a `level` column of 8 values (prompt i: i % 8),
    the strategy's options plus `options`; its allocator after 3 steps."""
    import sys

    plain = make_dataset
    levels = [f"width{i % 8}" for i in range(POOL)]
    monkeypatch.setattr(
        sys.modules[__name__],
        "make_dataset",
        lambda seed=0: plain(seed).add_column("level", levels),
    )
    monkeypatch.setitem(STRATEGIES, name, {**STRATEGIES[name], "strata": "level", **options})
    trainer, reward = make_trainer(name, tmp_path)
    trainer.train()
    alloc = trainer.allocator
    assert alloc.step == 3 and reward.scored == alloc.cum_rollouts > 0
    return alloc


def test_posterior_signal_reads_its_strata_from_the_dataset(tmp_path, monkeypatch):
    """strata=level: RollallocGRPOTrainer hands the dataset's column to the allocator
    (wire_pool_columns), which trains through TRL with a prior per level."""
    alloc = _train_with_levels(monkeypatch, tmp_path, "posterior-signal", select="top", window=2)
    assert len(set(alloc.stratum.tolist())) == 8
    assert all(alloc.stratum[i] == alloc.stratum[i % 8] for i in range(POOL))
    assert alloc.sema[:, 0].sum() > 0  # first visits fitted the levels' priors


def test_likelihood_rank_quota_reads_its_strata_from_the_dataset(tmp_path, monkeypatch):
    """strata=level quota=true (the paper testbed's configuration): the dataset's column reaches
    likelihood-rank through TRL, and each level's share of groups with variance is learnt."""
    alloc = _train_with_levels(monkeypatch, tmp_path, "likelihood-rank", quota=True)
    assert len(set(alloc.group.tolist())) == 8
    assert all(alloc.group[i] == alloc.group[i % 8] for i in range(POOL))
    assert (alloc._vary != 1.0).any()  # trained groups moved their levels' f_g


def test_trl_log_probs_reach_the_allocator_only_when_whole():
    from rollalloc.integrations.trl.trainer import _likelihoods

    ids = [[5, 6, 2], [5, 6, 2], [7, 2]]
    got = _likelihoods([[-0.1, -0.2, 0.0], [-0.1, -0.2, 0.0], [-1.0, -0.5]], ids, None)
    np.testing.assert_allclose(got["logprob"], [-0.3, -0.3, -1.5])
    assert got["completion_key"][0] == got["completion_key"][1] != got["completion_key"][2]
    assert _likelihoods([[-0.1, None, 0.0], [-0.1], [-1.0]], ids, None) == {}  # a token missing
    assert _likelihoods([[-0.1], [-0.1], [float("nan")]], ids, None) == {}
    assert _likelihoods([[-0.1], [-0.1], [-1.0]], ids, [[1], [1], [0]]) == {}  # tools
    assert _likelihoods(None, ids, None) == {}
