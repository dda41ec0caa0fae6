"""SPEED-RL (Zhang, Arora, Mei, Zanette 2025, "SPEED-RL: Faster Training of Reasoning Models via
Online Curriculum Learning", arXiv 2506.09016).

Each round screens `gen_prompts` new prompts with n_screen rollouts and keeps those whose screening
rewards are not all equal (pass rate strictly between 0% and 100%):

    std(r_screen) = 0, all correct     too easy    dropped
    std(r_screen) = 0, all wrong       too hard    dropped
    std(r_screen) > 0                  kept        queued for continuation

Binding: the same request that screens the new prompts continues *every* queued prompt with
n_continue rollouts, so one inference call serves two phases. A finished group is screen ∪ continue
(n_screen + n_continue rollouts). Rounds repeat until train_prompts groups are finished; finished
groups beyond that are carried to the next step (as in the reference), not thrown away. A step that
starts with enough carried groups generates nothing. Screening rollouts are one step old when the
survivors of a step's last round are continued and trained in the next step.

Reference: the data controller of the authors' verl fork (github.com/guanning03/JSPO-Official,
`verl/trainer/ppo/data_controller.py`, `run_fast_rloo_7b.sh`): n 4 + 20, 64 screened prompts per round
for 16 trained (4 x), at most 50 rounds. Differences: continuation is not rounded to a multiple of
the GPU count, and n_continue need not be a multiple of n_screen (the reference repeats the prompt).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rollalloc.allocator import Allocator, RoundsConfig, register
from rollalloc.groups import TwoPhase, groups_from_state, groups_to_state
from rollalloc.metrics import ZERO_STD_TOL
from rollalloc.validate import positive_int


@dataclass
class SpeedRLConfig(RoundsConfig):
    n_screen: int = 4
    """Screening rollouts per new prompt (reference `rollout.n`: 4)."""
    n_continue: int = 20
    """Continuation rollouts per kept prompt (reference `rollout.n_continue`: 20)."""
    max_rounds: int = 50
    """Generation rounds allowed per step (reference `max_num_gen_batches`: 50)."""
    gen_factor: ClassVar[float] = 4.0  # screened per round: 4 x train_prompts (reference)

    @classmethod
    def group_split(cls, group_size: int) -> dict[str, int]:
        n_screen = max(2, round(group_size / 6))  # the reference's screen 4, continue 20
        return {"n_screen": n_screen, "n_continue": group_size - n_screen}

    def validate(self, num_prompts: int) -> None:
        super().validate(num_prompts)
        positive_int(self, "n_screen", 2)  # one rollout cannot show reward variance
        positive_int(self, "n_continue", 0)


@register
class SpeedRL(Allocator):
    name = "speed-rl"
    Config = SpeedRLConfig

    @classmethod
    def example_config(cls):
        return {"n_screen": 2, "n_continue": 2}

    def _init_strategy(self):
        self.queue: list = []  # kept screening groups, continued by the next request
        self.two_phase = TwoPhase("screen", "continue")  # .waiting: empty between tell and ask
        self.carry: list = []  # finished groups beyond a step's batch, trained next step

    def _next_request(self):
        c = self.config
        if self.round == 0 and self.carry:
            self.train(self.carry)
            self.carry = []
        if len(self.ready) >= c.train_prompts:
            return None
        if self.rounds_exhausted("too few screens show reward variance"):
            return None
        screen = self.draw(c.round_prompts(self.num_prompts))
        # A prompt queued or finished already (a draw across an epoch boundary) is not screened again.
        busy = {g.prompt_id for g in self.queue + list(self.ready)}
        screen = [int(i) for i in screen if int(i) not in busy]
        cont, self.queue = (self.queue, []) if c.n_continue > 0 else ([], self.queue)
        parts = self.two_phase.request_parts(cont, c.n_continue, screen, c.n_screen)
        return self.make_request(*parts)  # every queued prompt continued, then the new screens

    def _on_results(self, request, groups):
        c = self.config
        mid = 0.5  # all-equal successes at or above 1/2: all solved
        if c.n_continue == 0:  # the screen is the whole group
            self.train(self.queue)
            self.queue = []
        continued, screen = self.two_phase.joined(groups)  # screen ∪ continue; (P,) new screens
        self.train(continued)
        zero_var = groups.hi - groups.lo <= ZERO_STD_TOL  # (P,)
        easy = screen & zero_var & (groups.means >= mid)
        hard = screen & zero_var & (groups.means < mid)
        self.discard(groups, "too_easy", where=easy)
        self.discard(groups, "too_hard", where=hard)
        self.queue += self.hold(groups.where(screen & ~zero_var), "kept")

    def _take_batch(self):
        B = self.config.train_prompts
        self.carry = self.hold(self.ready[B:])  # trained first next step
        return list(self.ready[:B])

    def _held_groups(self):
        return self.queue + list(self.two_phase.waiting.values()) + self.carry

    def _step_extra(self):
        return {"queue_size": len(self.queue), "carry_size": len(self.carry)}

    def _extra_state(self):
        return {"queue": groups_to_state(self.queue), "carry": groups_to_state(self.carry)}

    def _load_extra_state(self, state):
        self.queue = groups_from_state(state["queue"])
        self.carry = groups_from_state(state["carry"])
