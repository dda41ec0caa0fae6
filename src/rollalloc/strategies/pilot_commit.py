"""Pilot-Commit (Kim, Yang, Yan, Liu 2026, "Spend Your Rollouts Where It Counts", arXiv 2605.26606).

Each round pilots `gen_prompts` new prompts with n_pilot rollouts; acc = mean pilot reward estimates
the prompt's success rate p under the current policy. Two independent decisions follow, as in the
reference (`filter_batch` and `exclude_batch` in recipe/pc/pc_ray_trainer.py):

    the verdict   acc >  1 - p_upper            too easy    dropped this epoch
                  acc <  p_lower                too hard    deferred: back in the next epoch
                  p_lower <= acc <= 1 - p_upper kept        into the replay buffer, tagged with the step
    the exclusion acc >= exclude_threshold      evicted     out of the pool from the next epoch on

An excluded prompt gets its verdict like any other: a kept one is buffered and may be trained this
epoch. The exclusion is only marked (`mark_prompt_for_exclusion`) and applied when the epoch ends
(`apply_exclusions_to_dataset`, after the buffer is cleared); until then the prompt's status stays
ACTIVE (or DEFERRED). Within its epoch a prompt is not drawn again anyway, so "at once" and "at
epoch end" differ only in when the status reads EVICTED. The decision counter "evicted" counts the
prompts newly marked this step (the reference's `num_exclude_prompts`; a prompt piloted again before
its mark applies is not counted again); it is not a discard reason.

Binding: the same request that pilots the new prompts commits n_commit rollouts to
c = min(train_prompts - groups in batch, |buffer|) buffered prompts (sampled `random`, or by pilot
reward std, highest first, ties most recent: `max_variance`). A trained group is pilot ∪ commit,
n_pilot + n_commit rollouts. Rounds repeat until the step holds train_prompts groups. After each
step buffer entries with step_now - step_added > max_off_steps are dropped (`ReplayBuffer.flush`):
an entry exactly max_off_steps old stays and may be committed in the next step, so a trained pilot
is up to max_off_steps + 1 policy updates old. At the end of an epoch the buffer is cleared. The
trainer may correct stale pilots with importance ratios against their behaviour log-probs (the
reference recomputes old log-probs and does not).

Differences from the reference (recipe/pc in databricks/pilot-commit). The prompt stream is not
quite the reference's:
  - The reference iterates a dataloader with drop_last=True: the last len(pool) mod gen_prompts
    prompts of each shuffled epoch are never piloted in that epoch. Here a round draws from one
    continuous epoch stream: a round that reaches the end of an epoch takes the leftover prompts and
    continues with the next epoch's. So every prompt is piloted once per epoch; the leftover
    prompts' pilots arrive after the boundary (the buffer was cleared when the draw crossed it), so
    they are buffered in, and can be trained in, the next epoch, and their exclusions take effect
    one epoch later; such a prompt comes again at the end of the new epoch's order, and that pilot
    supersedes a buffered one ("repiloted").
  - At an epoch end the reference throws away an unfinished step (`batch = None`: the commits of
    the groups already in it are lost and its round count restarts). Here the step carries over the
    boundary: groups already completed are trained, rounds of both epochs count toward max_rounds,
    and a group completed before the boundary is trained even when the boundary has just evicted
    its prompt. Fewer rollouts are wasted; per epoch up to train_prompts groups differ.
  - A round pilots at most a quarter of the prompts not evicted (unless gen_prompts is set): on a
    pool of fewer than about two rounds (500 prompts, rounds of 3 x 128) every round would cross
    an epoch end, which clears the buffer before the commit, and nothing would ever be trained.
    The reference (drop_last) would pilot one round an epoch there and never commit either.
  - Pilots of at least 2 rollouts from group_split, and n_pilot is refused where no pilot
    accuracy k / n_pilot lies in the band (n_pilot = 1: every pilot is 0 or 1, never kept).
  - The reference shrinks a commit so that the rollouts divide by the GPU count
    (`_adjust_commit_batch_size_for_gpu_divisibility`) and may down-sample pilots (`n_effective`);
    neither is done here.
`evict=False` switches the exclusion off (as exclude_threshold=None). `bind=False` is added to
measure what binding buys (commit and pilot then go in separate requests).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rollalloc.allocator import Allocator, RoundsConfig, register
from rollalloc.groups import TwoPhase, groups_from_state, groups_to_state
from rollalloc.state import DEFERRED, EVICTED
from rollalloc.validate import boolean, in_range, one_of, positive_int


@dataclass
class PilotCommitConfig(RoundsConfig):
    n_pilot: int = 16
    """Pilot rollouts per new prompt (reference, Qwen3-4B / Polaris: 16; 1.5B / DeepMath: 32)."""
    n_commit: int = 48
    """Commit rollouts per kept prompt (reference: 48; 96). Group size = n_pilot + n_commit."""
    p_lower: float = 0.125
    """Too hard below this pilot accuracy."""
    p_upper: float = 0.25
    """Too easy above 1 - p_upper pilot accuracy."""
    exclude_threshold: float | None = 1.0
    """Evict for good, from the next epoch on, at this pilot accuracy or above, whatever the
    verdict; None never evicts (reference `exclude_threshold_upper`; scripts 1.0)."""
    evict: bool = True
    """False: never evict, as exclude_threshold=None (which verl's overlay cannot pass: a null there
    means the default). Not in the reference. With pilots of 2 (groups of 8) eviction emptied the
    hard pool's learnable part within four epochs and the run fell below GRPO; without it the run
    was as fast to the target and ended 1.9 points higher. Pilots of 4 lost 0.3 points to it; at
    pilots of 8 eviction did no harm (docs/testbed.md, "Eviction switched off")."""
    max_off_steps: int = 4
    """Buffered prompts older than this many steps are dropped."""
    buffer_sampling: str = "random"
    """Which buffered prompts are committed first: "random" or "max_variance"."""
    bind: bool = True
    """Commit and the next pilot in one request (one inference pass)."""

    @classmethod
    def group_split(cls, group_size: int) -> dict[str, int]:
        # the reference's 1:3 (16 + 48, 32 + 96); pilots of at least 2, which can land in the band
        n_pilot = min(max(2, round(group_size / 4)), group_size)
        return {"n_pilot": n_pilot, "n_commit": group_size - n_pilot}

    def validate(self, num_prompts: int) -> None:
        super().validate(num_prompts)
        positive_int(self, "n_pilot")
        positive_int(self, "n_commit", 0)
        in_range(self, "p_lower", 0.0, 1.0)
        in_range(self, "p_upper", 0.0, 1.0)
        if self.p_lower > 1 - self.p_upper:
            raise ValueError(
                f"p_lower={self.p_lower} and p_upper={self.p_upper} leave no band to keep "
                "(need p_lower <= 1 - p_upper)"
            )
        accs = [k / self.n_pilot for k in range(self.n_pilot + 1)]
        if not any(self.p_lower <= a <= 1 - self.p_upper for a in accs):
            raise ValueError(
                f"n_pilot={self.n_pilot}: no pilot accuracy k/{self.n_pilot} lies in the band "
                f"[p_lower, 1 - p_upper] = [{self.p_lower}, {1 - self.p_upper}], so no prompt is "
                "ever kept; use more pilot rollouts (the reference's n_pilot = group size / 4)"
            )
        if self.exclude_threshold is not None:
            in_range(self, "exclude_threshold", 0.0, 1.0)
        positive_int(self, "max_off_steps", 0)
        one_of(self, "buffer_sampling", ("random", "max_variance"))
        boolean(self, "evict")
        boolean(self, "bind")


@register
class PilotCommit(Allocator):
    name = "pilot-commit"
    Config = PilotCommitConfig

    @classmethod
    def example_config(cls):
        return {"n_pilot": 4, "n_commit": 2}

    def _init_strategy(self):
        self.buffer: list = []  # kept pilot groups waiting for their commit (Group.step = added)
        self.two_phase = TwoPhase("pilot", "commit")  # .waiting: buffered groups being committed
        self._to_evict: set[int] = set()  # marked for exclusion, applied at the end of the epoch

    def _next_request(self):
        c = self.config
        if len(self.ready) >= c.train_prompts:
            return None
        hint = f"too few pilots land in [p_lower, 1 - p_upper] = [{c.p_lower}, {1 - c.p_upper}]"
        fix = None  # rounds_exhausted's default remedy
        if cleared := self.step_decisions.get("buffer_cleared", 0):
            hint = (
                f"epoch ends cleared {cleared} kept pilots before their commit (rounds of "
                f"{self._round_size()} pilots on {self._active()} prompts not evicted)"
            )
            fix = "lower gen_prompts to a quarter of the pool or less (0: the default does)"
        if self.rounds_exhausted(hint, fix):
            return None
        if not c.bind and self.buffer:  # a commit request of its own
            commit, pilots = self._pick_commits(c.train_prompts - len(self.ready)), []
        else:
            # Draw the new pilots first: an epoch boundary clears the buffer before we commit.
            pilots = self.draw(self._round_size())
            # A prompt piloted again (a draw across an epoch boundary) supersedes its buffered pilot.
            redrawn = set(pilots.tolist())
            self.discard([g for g in self.buffer if g.prompt_id in redrawn], "repiloted")
            self.buffer = [g for g in self.buffer if g.prompt_id not in redrawn]
            commit = self._pick_commits(c.train_prompts - len(self.ready)) if c.bind else []
        parts = self.two_phase.request_parts(commit, c.n_commit, pilots, c.n_pilot)
        return self.make_request(*parts)  # commits first, then the pilots

    def _active(self) -> int:
        return int((self.table.status != EVICTED).sum())

    def _round_size(self) -> int:
        """Pilots per round: gen_prompts, or by default gen_factor x train_prompts, at most a
        quarter of the prompts not evicted. A round that crosses an epoch end clears the buffer
        before its kept pilots are committed (the reference's order), so on a pool of fewer than
        about two rounds nothing would ever be trained; with four rounds or more to an epoch at
        most about a quarter of the kept pilots are lost at its end."""
        c = self.config
        if c.gen_prompts:
            return c.gen_prompts
        return max(1, min(c.round_prompts(self.num_prompts), self._active() // 4))

    def _pick_commits(self, need: int) -> list:
        k = min(need, len(self.buffer))
        if k == 0:
            return []
        if self.config.buffer_sampling == "random":
            idx = self.rng.choice(len(self.buffer), size=k, replace=False)
        else:  # highest pilot reward std first, ties: most recently added
            idx = sorted(
                range(len(self.buffer)),
                key=lambda i: (-self.buffer[i].stat, -self.buffer[i].step, i),
            )[:k]
        chosen = [self.buffer[i] for i in idx]
        drop = set(int(i) for i in idx)
        self.buffer = [g for i, g in enumerate(self.buffer) if i not in drop]
        if self.config.n_commit == 0:  # nothing to generate: the pilot is the whole group
            self.train(chosen)
            return []
        return chosen

    def _on_results(self, request, groups):
        c = self.config
        committed, pilot = self.two_phase.joined(groups)  # pilot ∪ commit; (P,) the new pilots
        self.train(committed)
        acc = groups.means  # (P,) pilot success rate where pilot
        ids = groups.prompt_ids
        # The verdict and the exclusion are independent (reference: filter_batch, exclude_batch).
        easy = pilot & (acc > 1 - c.p_upper)
        hard = pilot & ~easy & (acc < c.p_lower)
        keep = pilot & ~(easy | hard)
        if c.evict and c.exclude_threshold is not None:
            marked = ids[pilot & (acc >= c.exclude_threshold)].tolist()
            # a prompt piloted again before its mark applies (a leftover round across an epoch
            # end) is counted once
            new = [i for i in marked if i not in self._to_evict and self.table.status[i] != EVICTED]
            self._to_evict.update(marked)
            self.count("evicted", len(new))
        self.table.status[ids[hard]] = DEFERRED
        self.discard(groups, "too_easy", where=easy)
        self.discard(groups, "too_hard", where=hard)
        kept = groups.where(keep)
        for g in kept:
            g.stat = g.std  # the max_variance sort key
        self.buffer += self.hold(kept, "kept")
        if c.n_commit == 0 and len(self.ready) < c.train_prompts:
            self._pick_commits(c.train_prompts - len(self.ready))

    def _after_step(self):
        stale = [g for g in self.buffer if self.step - g.step > self.config.max_off_steps]
        self.discard(stale, "stale")
        self.buffer = [g for g in self.buffer if self.step - g.step <= self.config.max_off_steps]

    def _on_epoch_end(self):
        # Reference order: clear the buffer, then apply the exclusions marked this epoch. Called by
        # the base class before DEFERRED -> ACTIVE and the next epoch's order, which leaves them out.
        self.discard(self.buffer, "buffer_cleared")
        self.buffer = []
        if self._to_evict:
            self.table.status[np.fromiter(self._to_evict, np.int64)] = EVICTED
            self._to_evict = set()

    def _held_groups(self):
        return self.buffer + list(self.two_phase.waiting.values())

    def _step_extra(self):
        return {"buffer_size": len(self.buffer)}

    def _extra_state(self):
        return {
            "buffer": groups_to_state(self.buffer),
            "committing": groups_to_state(list(self.two_phase.waiting.values())),
            "to_evict": np.array(sorted(self._to_evict), dtype=np.int64),
        }

    def _load_extra_state(self, state):
        self.buffer = groups_from_state(state["buffer"])
        self.two_phase.waiting = {g.prompt_id: g for g in groups_from_state(state["committing"])}
        # states written before exclusions were deferred evicted at once: nothing is pending
        self._to_evict = set(np.asarray(state.get("to_evict", []), dtype=np.int64).tolist())
