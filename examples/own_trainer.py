"""rollalloc in your own trainer: a complete loop with a toy policy (docs/own-trainer.md).

The toy policy has one logit per prompt; a rollout is correct with probability
sigmoid(theta_i - difficulty_i). The loop is the one a real trainer needs: ask/tell with
caller-owned handles, a rollout store, success vs reward, group advantages on ragged groups, a
clipped importance-ratio update against the behaviour log-probs (Pilot-Commit trains pilots that
are several updates old), freeing released and trained rollouts, and a checkpoint that resumes
identically. Runs in about a second: `python examples/own_trainer.py`.
"""

import tempfile
from pathlib import Path

import numpy as np

import rollalloc
from rollalloc import Outcome, group_advantages, make_allocator

NUM_PROMPTS = 256
ALLOCATOR = dict(
    num_prompts=NUM_PROMPTS,
    seed=0,
    train_prompts=16,
    n_pilot=4,  # groups of 16 = 4 pilot + 12 commit rollouts (the reference's 1:3 split)
    n_commit=12,
    reward_max=1.1,  # correctness 0/1 plus a 0.1 format bonus
)
difficulty = np.random.default_rng(1).normal(1.5, 1.5, size=NUM_PROMPTS)  # (P,) the toy task


def p_correct(theta, prompt_ids):
    return 1.0 / (1.0 + np.exp(-(theta[prompt_ids] - difficulty[prompt_ids])))


def logprob(theta, prompt_ids, correct):
    """log pi(rollout) under the policy `theta`: (R,)."""
    p = p_correct(theta, prompt_ids)
    return np.where(correct == 1, np.log(p), np.log1p(-p))


class Trainer:
    def __init__(self):
        self.alloc = make_allocator("pilot-commit", **ALLOCATOR)
        self.theta = np.zeros(NUM_PROMPTS)  # the policy's weights
        self.version = 0  # policy updates so far
        self.next_handle = 0
        # the rollout store: handle -> (prompt id, correct, behaviour log-prob, policy version)
        self.store: dict[int, tuple[int, int, float, int]] = {}

    def generate(self, request):
        """One generation pass: every rollout of the request, told to the allocator."""
        prompt_ids = request.expand()  # (R,) prompt id of every rollout
        rng = np.random.default_rng([request.step, request.round])  # reproducible on resume
        correct = (rng.random(len(prompt_ids)) < p_correct(self.theta, prompt_ids)).astype(int)
        well_formatted = rng.random(len(prompt_ids)) < 0.9
        rewards = correct + 0.1 * well_formatted  # what advantages are computed from
        behaviour = logprob(self.theta, prompt_ids, correct)  # log-probs at sampling time
        handles = np.arange(self.next_handle, self.next_handle + len(prompt_ids))
        self.next_handle += len(prompt_ids)
        for h, p, c, lp in zip(handles.tolist(), prompt_ids.tolist(), correct, behaviour):
            self.store[h] = (p, int(c), float(lp), self.version)
        # success: the verdict the allocator decides on (pilot accuracy, eviction), in [0, 1]
        self.alloc.tell(
            Outcome(prompt_ids, handles, rewards, success=correct, policy_version=self.version)
        )

    def step(self, lr=1.0, clip=0.2):
        while (request := self.alloc.ask()) is not None:
            self.generate(request)
        batch = self.alloc.batch()
        for h in batch.released.tolist():  # generated, never to be trained: free now
            del self.store[h]
        rows = [self.store[h] for h in batch.handles.tolist()]  # (R,) in batch order
        pids = np.array([r[0] for r in rows])
        correct = np.array([r[1] for r in rows])
        behaviour = np.array([r[2] for r in rows])
        lag = self.version - np.array([r[3] for r in rows])  # updates since each was generated
        adv = group_advantages(batch.rewards, batch.group_sizes)  # (R,) ragged groups
        # PPO-clip against the behaviour policy: the ratio corrects stale (buffered) pilots
        ratio = np.exp(logprob(self.theta, pids, correct) - behaviour)
        clipped = ((adv > 0) & (ratio > 1 + clip)) | ((adv < 0) & (ratio < 1 - clip))
        dlogp = correct - p_correct(self.theta, pids)  # d log pi / d theta of a Bernoulli logit
        grad = np.where(clipped, 0.0, ratio * adv * dlogp)
        sizes = batch.group_sizes[batch.group_index()]  # (R,) size of each rollout's group
        np.add.at(self.theta, pids, lr * grad / sizes)  # a mean over each group per prompt
        self.version += 1
        for h in batch.handles.tolist():  # trained: free after the update
            del self.store[h]
        assert len(self.store) == self.alloc.live_handles  # buffered pilots only
        return batch, lag

    def state_dict(self):
        """Allocator and trainer in one state: one file, written atomically."""
        live = sorted(self.store)
        return {
            "allocator": self.alloc.state_dict(),
            "trainer": {
                "theta": self.theta,
                "version": self.version,
                "next_handle": self.next_handle,
                "handles": np.array(live, dtype=np.int64),
                "rollouts": np.array([self.store[h] for h in live], dtype=np.float64),
            },
        }

    def load_state_dict(self, state):
        self.alloc.load_state_dict(state["allocator"])
        t = state["trainer"]
        self.theta = np.array(t["theta"])
        self.version, self.next_handle = int(t["version"]), int(t["next_handle"])
        self.store = {
            int(h): (int(r[0]), int(r[1]), float(r[2]), int(r[3]))
            for h, r in zip(t["handles"], t["rollouts"])
        }


def main():
    trainer = Trainer()
    p0 = p_correct(trainer.theta, np.arange(NUM_PROMPTS)).mean()
    max_lag = 0
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = Path(tmp) / "checkpoint.npz"
        for step in range(30):
            batch, lag = trainer.step()
            max_lag = max(max_lag, int(lag.max()))
            if step % 10 == 9:
                s = batch.stats
                print(
                    f"step {step + 1}: {s.cum_rollouts} rollouts, {s.groups} groups, "
                    f"decisions {s.decisions}, buffer {s.extra.get('buffer_size', 0):.0f}"
                )
            if step == 19:
                rollalloc.save_state(ckpt, trainer.state_dict())  # between steps
        # resume from the checkpoint of step 20: the next steps are the same
        resumed = Trainer()
        resumed.load_state_dict(rollalloc.load_state(ckpt))
    for _ in range(10):
        batch_r, _ = resumed.step()
    assert np.array_equal(batch_r.handles, batch.handles)
    assert np.allclose(resumed.theta, trainer.theta)
    p1 = p_correct(trainer.theta, np.arange(NUM_PROMPTS)).mean()
    print(f"pool success rate {p0:.3f} -> {p1:.3f}; oldest trained rollout {max_lag} updates old")
    print(f"resumed run identical; {len(trainer.store)} buffered rollouts still held")
    assert p1 > p0 and max_lag <= trainer.alloc.config.max_off_steps + 1


if __name__ == "__main__":
    main()
