"""A DataProto round trip through the adapter: every rollout kept, found by its handle, grouped by uid."""

import numpy as np
import pytest
import torch
from verl import DataProto
from verl.utils.dataset.rl_dataset import collate_fn
from verl_fakes import FakePolicy, FakeRolloutManager, PromptDataset

from rollalloc.allocator import make_allocator
from rollalloc.integrations.verl import (
    RolloutStore,
    assemble_train_batch,
    build_generation_batch,
    rollalloc_metrics,
    rollout_rewards,
)
from rollalloc.integrations.verl.adapter import PHASE, PROMPT_ID, response_tokens
from rollalloc.types import Outcome, Request


def _prompts(dataset, ids):
    return DataProto.from_single_dict(collate_fn([dataset[int(i)] for i in ids]))


def test_round_trip_keeps_every_rollout_with_its_uid():
    dataset = PromptDataset(48)
    policy = FakePolicy(dataset.difficulty)
    gen = FakeRolloutManager(policy, None)
    alloc = make_allocator(
        "pilot-commit",
        num_prompts=48,
        seed=0,
        train_prompts=4,
        n_pilot=3,
        n_commit=5,
        gen_prompts=8,
    )
    store = RolloutStore()
    serial_of = {}  # handle -> serial token the fake generator wrote into that rollout
    trained_serials = []
    pilots_from_earlier_steps = 0
    for step in range(8):
        while (req := alloc.ask()) is not None:
            batch = build_generation_batch(req, _prompts(dataset, req.prompt_ids))
            assert len(batch) == req.total
            np.testing.assert_array_equal(batch.non_tensor_batch[PROMPT_ID], req.expand())
            np.testing.assert_array_equal(batch.non_tensor_batch["index"], req.expand())
            batch.meta_info["global_steps"] = step
            out = gen.generate_sequences(batch)
            batch = batch.union(out)
            batch.meta_info["reward_extra_keys"] = ["acc"]
            handles = store.add(batch)
            for h, s in zip(handles, batch.batch["responses"][:, 0].tolist()):
                serial_of[int(h)] = (s, step)
            alloc.tell(
                Outcome(
                    prompt_ids=batch.non_tensor_batch[PROMPT_ID],
                    handles=handles,
                    rewards=rollout_rewards(batch),
                    tokens=response_tokens(batch),
                )
            )
        tb = alloc.batch()
        store.release(tb.released)
        data = assemble_train_batch(tb, store)
        store.release(tb.handles)
        assert (
            len(store) == alloc.live_handles
        )  # the store holds exactly what the allocator refers to
        assert len(data) == tb.num_rollouts == 4 * (3 + 5)
        # rows are the rollouts of the handles, in order
        got = data.batch["responses"][:, 0].tolist()
        assert got == [serial_of[int(h)][0] for h in tb.handles]
        np.testing.assert_array_equal(
            data.batch["prompts"][:, -1].numpy(), tb.prompt_ids[tb.group_index()]
        )
        # one uid per group, distinct across groups, rewards carried along
        uid = data.non_tensor_batch["uid"]
        for g, (pid, _handles, rw) in enumerate(tb.groups()):
            rows = np.flatnonzero(tb.group_index() == g)
            assert set(uid[rows]) == {f"{tb.step}:{g}:{pid}"}
            np.testing.assert_array_equal(data.non_tensor_batch["acc"][rows], rw)
        assert len(set(uid)) == tb.num_groups
        assert list(data.non_tensor_batch[PHASE]) == list(tb.phases)
        pilots_from_earlier_steps += sum(
            1
            for h, ph in zip(tb.handles, tb.phases)
            if ph == "pilot" and serial_of[int(h)][1] < step
        )
        trained_serials += got
    assert len(trained_serials) == len(set(trained_serials))  # no rollout trained twice
    assert pilots_from_earlier_steps > 0  # buffered pilots came back in later steps, rows intact


def test_rollout_rewards_reads_acc_or_score():
    scores = torch.tensor([[0.0, 0.5, 0.0], [0.0, 0.0, 1.0]])
    data = DataProto.from_single_dict(
        {"rm_scores": scores, "acc": np.array([0.0, 1.0])}, meta_info={"reward_extra_keys": ["acc"]}
    )
    np.testing.assert_array_equal(rollout_rewards(data, "auto"), [0.0, 1.0])
    np.testing.assert_array_equal(rollout_rewards(data, "score"), [0.5, 1.0])
    with pytest.raises(ValueError, match="'pass_rate' is not in the reward manager's extra info"):
        rollout_rewards(data, "pass_rate")
    no_scores = DataProto.from_single_dict({"x": torch.zeros(2, 1)})
    with pytest.raises(ValueError, match="no 'rm_scores'"):
        rollout_rewards(no_scores, "auto")


def test_build_generation_batch_checks_prompt_rows():
    dataset = PromptDataset(8)
    req = Request(
        step=0, round=0, prompt_ids=[1, 2], num_rollouts=[3, 1], phases=["pilot", "commit"]
    )
    with pytest.raises(ValueError, match="1 prompt rows for a request of 2 prompts"):
        build_generation_batch(req, _prompts(dataset, [1]))
    out = build_generation_batch(req, _prompts(dataset, [1, 2]))
    assert list(out.non_tensor_batch[PHASE]) == ["pilot"] * 3 + ["commit"]
    assert (
        len(set(out.non_tensor_batch["uid"][:3])) == 1
        and out.non_tensor_batch["uid"][3] != out.non_tensor_batch["uid"][0]
    )


def test_metrics_are_flat_rollalloc_scalars():
    alloc = make_allocator(
        "pilot-commit", num_prompts=16, seed=0, train_prompts=2, n_pilot=2, n_commit=2
    )
    rng = np.random.default_rng(0)
    h = 0
    while (req := alloc.ask()) is not None:
        n = req.total
        alloc.tell(Outcome(req.expand(), np.arange(h, h + n), rng.integers(0, 2, n).astype(float)))
        h += n
    tb = alloc.batch()
    m = rollalloc_metrics(tb.stats, tb)
    assert all(k.startswith("rollalloc/") and isinstance(v, float) for k, v in m.items())
    assert m["rollalloc/rollouts_by_phase/pilot"] > 0
    assert m["rollalloc/buffer_size"] == tb.stats.extra["buffer_size"]
    assert m["rollalloc/effective_prompt_ratio"] == tb.stats.effective_prompt_ratio
    assert m["rollalloc/groups"] == 2


def test_response_likelihoods_sum_the_masked_rollout_log_probs():
    from rollalloc.integrations.verl.adapter import response_likelihoods

    responses = torch.tensor([[5, 6, 0, 0], [5, 6, 0, 0], [5, 7, 9, 0]])
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0]])
    lp = torch.tensor(
        [[-0.1, -0.2, -9.0, -9.0], [-0.1, -0.2, -5.0, -5.0], [-1.0, -2.0, -3.0, -4.0]]
    )
    attention = torch.cat([torch.ones(3, 2, dtype=torch.long), mask], dim=1)  # prompt + response
    batch = DataProto.from_single_dict(
        {"responses": responses, "response_mask": mask, "attention_mask": attention,
         "rollout_log_probs": lp}
    )  # fmt: skip
    logprob, key = response_likelihoods(batch)
    np.testing.assert_allclose(logprob, [-0.3, -0.3, -6.0])  # padding's log-probs ignored
    assert key[0] == key[1] != key[2]  # equal responses under the mask, equal keys
    assert response_likelihoods(DataProto.from_single_dict({"responses": responses})) is None
    tool = mask.clone()
    tool[2, 1] = 0  # a tool output token inside the response: not sampled
    multi = DataProto.from_single_dict(
        {"responses": responses, "response_mask": tool, "attention_mask": attention,
         "rollout_log_probs": lp}
    )  # fmt: skip
    assert response_likelihoods(multi) is None
