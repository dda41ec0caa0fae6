"""`RollallocGRPOTrainer`: TRL's `GRPOTrainer` with the rollouts allocated by a rollalloc allocator.

Design (TRL 1.16, `trl/trainer/grpo_trainer.py`)
------------------------------------------------

TRL generates once per *generation batch*: `_prepare_inputs` calls `_generate_and_score_completions`
every `steps_per_generation * num_iterations` micro-steps with the rows its `RepeatSampler` drew
(`generation_batch_size = per_device_train_batch_size * steps_per_generation * num_processes` rows,
each prompt repeated `num_generations` times), then shuffles the result and splits it into
`steps_per_generation` micro-batches for gradient accumulation. Inside, `_generate` (tokenise +
transformers / continuous-batching / vLLM generation + length metrics) and `_calculate_rewards`
(TRL's reward functions, gathered over processes) feed TRL's own tensor code: padding, old and
reference log-probs, advantages grouped by `rewards.view(-1, num_generations)`, and metrics.

In fixed-batch mode every rollalloc strategy trains exactly `train_prompts` groups of one constant
size per step: the shape TRL expects with `num_generations = group size` and
`generation_batch_size = train_prompts * group size`. So one allocator step is one TRL generation
batch, and the seam is `_generate_and_score_completions` (training mode only):

    TRL dataloader rows ──(ignored in training: only the clock)──┐
                                                                 ▼
    _generate_and_score_completions(rows)            [override]
      while (req := allocator.ask()) is not None:               one Request = one generation call
          rows_r  = train_dataset[req.expand()]                 the allocator picks the prompts
          _generate(prompts_r)                       [TRL's]    n=1 per row: requests are ragged
          _calculate_rewards(rows_r, ...)            [TRL's]    rewards per reward function (R, F)
          store.add(...) -> handles; allocator.tell(Outcome)    rollouts kept by handle
      batch = allocator.batch(); store.release(batch.released)
      super()._generate_and_score_completions(rows of batch)    TRL's own code, in *replay* mode:
          _generate           [override] returns the stored completions of batch.handles
          _calculate_rewards  [override] returns their stored rewards (and log_extra columns)
          -> padding, old/ref log-probs, advantages, loss inputs, metrics, completion tables: TRL's
      store.release(batch.handles); rollalloc metrics -> self._metrics["train"]

The groups of a TrainBatch are laid out contiguously, each of size `num_generations`, so TRL's
grouped advantages are the groups rollalloc chose. TRL's loss types, `scale_rewards`,
`multi_objective_aggregation`, `num_iterations`, logging and callbacks are untouched.

- Prompt selection belongs to the allocator (the prompt pool is the train dataset's indices). TRL's
  dataloader still runs: its batches decide *when* a step is generated and how long training lasts
  (`max_steps` / `num_train_epochs`), their rows are not used in training. Evaluation is TRL's own.
- Rollouts that outlive a step (Pilot-Commit's buffered pilots) stay in a `RolloutStore` keyed by
  handle, with prompt and completion token ids, decoded completion, rewards per reward function,
  tool mask and vLLM sampling log-probs. Old log-probs are recomputed by TRL with the current policy
  when the batch is assembled (the reference Pilot-Commit does the same, no importance correction);
  with vLLM's importance-sampling correction on, the stored sampling log-probs of a stale pilot make
  TRL's truncated ratio also cover the policy lag.
- Accounting: every rollout TRL generated in training is told to the allocator exactly once, so
  `rollouts_generated == allocator.cum_rollouts`. TRL's `completions/*` length metrics and
  `num_input_tokens_seen` count every generated rollout (pilots and discarded ones too); its
  `reward*`, `frac_reward_zero_std` and completion tables describe the trained batch.
- Checkpoints: `_save_checkpoint` writes `<checkpoint>/rollalloc/` (allocator state via
  `rollalloc.state.save_state`, the rollout store, a meta file); `_load_optimizer_and_scheduler`,
  which TRL's `Trainer` calls with the checkpoint path on `resume_from_checkpoint`, restores them.
  The allocator is always at a step boundary between two generation batches. Resuming from a
  checkpoint without `rollalloc/` raises: silently restarting the allocator is the bug this avoids.
- Generation round calls pass `num_generations=1` to `_generate_single_turn`: vLLM server mode
  otherwise de-duplicates `prompts[::num_generations]`, which assumes equal repeats.

Limits (checked in `__init__`, each error names the problem): one process (no DDP/DeepSpeed/FSDP:
the rollouts of one group would live on different ranks), no tools / environments / images,
map-style train dataset, a fixed-batch allocator whose groups match `num_generations`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from trl import GRPOTrainer

from rollalloc.allocator import wire_pool_columns
from rollalloc.integrations import allocator_batch_shape
from rollalloc.integrations.trl.store import RolloutStore, StoredRollout
from rollalloc.likelihood import completion_keys
from rollalloc.types import Outcome, TrainBatch

CHECKPOINT_SUBDIR = "rollalloc"
META_FORMAT = "rollalloc.trl.checkpoint/1"

AllocatorReward = Callable[[np.ndarray, Sequence[str]], np.ndarray]
"""(rewards_per_func (R, F) with NaN for None, reward function names) -> reward per rollout (R,)."""


class RollallocGRPOTrainer(GRPOTrainer):
    """`GRPOTrainer` whose rollouts are allocated by `allocator` (see the module docstring).

    Args:
        allocator: a rollalloc allocator in fixed-batch mode over `len(train_dataset)` prompts, e.g.
            `make_allocator("pilot-commit", num_prompts=len(ds), train_prompts=8, n_pilot=2,
            n_commit=6)` with `num_generations=8` and `generation_batch_size=64`.
        allocator_reward: what the allocator sees as a rollout's reward. None: TRL's weighted sum of
            the reward functions (`reward_weights`); a string: the column of that reward function
            only (e.g. the correctness reward when a format reward is added); a callable
            `(rewards_per_func (R, F), names) -> (R,)`.
        unscorable_reward: the allocator's reward for a rollout every reward function returned None
            for (TRL gives it zero advantage; the allocator needs a number).
        All other arguments are `GRPOTrainer`'s.
    """

    def __init__(
        self,
        *args: Any,
        allocator: Any,
        allocator_reward: str | AllocatorReward | None = None,
        unscorable_reward: float = 0.0,
        **kwargs: Any,
    ) -> None:
        if allocator is None:
            raise ValueError(
                "RollallocGRPOTrainer: allocator is required (rollalloc.make_allocator(...))"
            )
        super().__init__(*args, **kwargs)
        self.allocator = allocator
        self.allocator_reward = allocator_reward
        self.unscorable_reward = float(unscorable_reward)
        self.rollout_store = RolloutStore(len(self.reward_funcs))
        self.rollouts_generated = 0  # rollouts TRL generated for the allocator (training only)
        self._in_round = False  # inside an allocator generation round
        self._replay: list[StoredRollout] | None = None  # the trained batch while TRL assembles it
        self.step_stats: list[dict[str, Any]] = []  # StepStats.to_dict() of every allocator step
        self._check_supported()

    # ------------------------------------------------------------------ configuration checks

    def _check_supported(self) -> None:
        name = type(self).__name__
        if self.accelerator.num_processes != 1:
            raise NotImplementedError(
                f"{name}: runs on one process only (got {self.accelerator.num_processes}); the rollouts of a "
                "group would be generated on different ranks. Use rollalloc's verl integration to scale out."
            )
        if self.tools or self.environment_factories is not None:
            raise NotImplementedError(
                f"{name}: tools and environment_factory are not supported yet"
            )
        ds = self.train_dataset
        if ds is None or not hasattr(ds, "__len__") or not hasattr(ds, "__getitem__"):
            raise ValueError(
                f"{name}: train_dataset must be a map-style dataset (the allocator's prompt pool)"
            )
        cols = set(getattr(ds, "column_names", None) or ds[0].keys())
        if "prompt" not in cols:
            raise ValueError(f"{name}: train_dataset needs a 'prompt' column")
        if cols & {"image", "images"}:
            raise NotImplementedError(f"{name}: image datasets are not supported yet")
        num_prompts = getattr(self.allocator, "num_prompts", None)
        if num_prompts is not None and int(num_prompts) != len(ds):
            raise ValueError(
                f"{name}: allocator.num_prompts={num_prompts} but train_dataset has {len(ds)} rows; "
                "the prompt pool is the dataset's indices"
            )
        wire_pool_columns(self.allocator, ds)  # the columns it reads (posterior-signal's strata)
        n = self.num_generations
        if self.args.generation_batch_size % n:
            raise ValueError(f"{name}: generation_batch_size must be a multiple of num_generations")
        expected = self._expected_shape()
        if expected is not None and expected != (self.args.generation_batch_size // n, n):
            groups, size = expected
            raise ValueError(
                f"{name}: the allocator trains {groups} groups of {size} rollouts per step, but TRL is set "
                f"up for {self.args.generation_batch_size // n} groups of num_generations={n} "
                f"(generation_batch_size={self.args.generation_batch_size}); set num_generations={size} and "
                f"generation_batch_size={groups * size} (per_device_train_batch_size * steps_per_generation)"
            )
        if not getattr(self.allocator, "equal_group_sizes", True):
            raise ValueError(
                f"{name}: the allocator trains groups of different sizes ({self.allocator.name}); TRL "
                f"needs every group to have num_generations rollouts: build it with "
                f"options_for_group_size(..., constant_batch=True) where the strategy has that mode "
                f"(knapsack has none)"
            )
        cfg = getattr(self.allocator, "config", None)
        if getattr(cfg, "on_max_rounds", "error") != "error":
            raise ValueError(
                f"{name}: on_max_rounds='train' may end a step with fewer groups than TRL's fixed "
                "batch holds; use on_max_rounds='error' (and a larger max_rounds or gen_prompts)"
            )
        if not getattr(self.allocator, "fixed_batch", True):
            raise ValueError(
                f"{name}: the allocator trains a variable number of groups per step (fixed_batch "
                "is False: CERO's faithful mode, grpo's small_every); TRL needs a constant batch: "
                "build CERO with fixed_batch=True, grpo without small_every"
            )
        if (
            isinstance(self.allocator_reward, str)
            and self.allocator_reward not in self.reward_func_names
        ):
            raise ValueError(
                f"{name}: allocator_reward={self.allocator_reward!r} is not one of the reward functions "
                f"{list(self.reward_func_names)}"
            )

    def _expected_shape(self) -> tuple[int, int] | None:
        return allocator_batch_shape(self.allocator)

    # ------------------------------------------------------------------ the seam

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        if not self.model.training:  # evaluation stays TRL's (RepeatSampler, num_generations_eval)
            return super()._generate_and_score_completions(inputs)
        batch = self._run_allocator_step()
        records = self.rollout_store.get(batch.handles)  # (R,) in group order
        rows = [self._dataset_row(r.prompt_id) for r in records]
        self._replay = records
        try:
            output = super()._generate_and_score_completions(rows)
        finally:
            self._replay = None
        self.rollout_store.release(batch.handles)  # trained: the allocator no longer refers to them
        self._log_allocator_metrics(batch)
        return output

    def _run_allocator_step(self) -> TrainBatch:
        """All ask/tell rounds of one allocator step, then its TrainBatch (checked against TRL's shape)."""
        while (request := self.allocator.ask()) is not None:
            prompt_id = request.expand()  # (R,) one entry per rollout to generate
            rows = [self._dataset_row(int(p)) for p in prompt_id]
            prompts = [row["prompt"] for row in rows]
            self._in_round = True
            try:
                (
                    prompt_ids,
                    completion_ids,
                    tool_mask,
                    completions,
                    logprobs,
                    extra_fields,
                    _,
                    _,
                ) = self._generate(prompts)
            finally:
                self._in_round = False
            if extra_fields:  # rollout_func extras reach the reward functions, as in TRL
                for i, row in enumerate(rows):
                    for key, values in extra_fields.items():
                        row[key] = (
                            values[i] if isinstance(values, list) and i < len(values) else values
                        )
            rewards_per_func = self._calculate_rewards(
                rows, prompts, completions, completion_ids
            )  # (R, F)
            rewards_per_func = rewards_per_func.detach().float().cpu().numpy()
            extra = self._pop_extra_logs(len(rows))
            records = [
                StoredRollout(
                    prompt_id=int(prompt_id[i]),
                    prompt_ids=list(prompt_ids[i]),
                    completion_ids=list(completion_ids[i]),
                    completion=completions[i],
                    rewards_per_func=rewards_per_func[i].copy(),
                    policy_version=int(self.state.global_step),
                    tool_mask=list(tool_mask[i]) if tool_mask is not None else None,
                    sampling_logps=list(logprobs[i]) if logprobs is not None else None,
                    extra={k: v[i] for k, v in extra.items()},
                )
                for i in range(len(rows))
            ]
            handles = self.rollout_store.add(records)
            scalar = self._scalar_rewards(rewards_per_func)
            outcome = Outcome(
                prompt_ids=prompt_id,
                handles=handles,
                rewards=scalar,
                tokens=np.array([len(c) for c in completion_ids], dtype=np.int64),
                policy_version=int(self.state.global_step),
                **_likelihoods(logprobs, completion_ids, tool_mask),
            )
            try:
                self.allocator.tell(outcome)
            except ValueError as e:
                self.rollout_store.release(handles)
                raise ValueError(
                    f"{type(self).__name__}: the allocator rejected the rewards of TRL's reward functions ({e}); "
                    "strategies decide on a success in [0, 1]: pass the correctness reward with "
                    "allocator_reward='NAME' (or a callable), or give the allocator reward_min / "
                    "reward_max and a success_threshold"
                ) from e
            self.rollouts_generated += len(rows)
        batch = self.allocator.batch()
        self.rollout_store.release(batch.released)
        n = self.num_generations
        groups = self.args.generation_batch_size // n
        if batch.num_groups != groups or np.any(batch.group_sizes != n):
            raise RuntimeError(
                f"{type(self).__name__}: allocator step {batch.step} returned {batch.num_groups} groups of sizes "
                f"{sorted(set(batch.group_sizes.tolist()))}, TRL needs {groups} groups of num_generations={n}; "
                "use the strategy's fixed-batch mode with matching train_prompts and group size"
            )
        return batch

    def _dataset_row(self, prompt_id: int) -> dict[str, Any]:
        return dict(
            self.train_dataset[int(prompt_id)]
        )  # a copy: reward kwargs may be merged into it

    def _scalar_rewards(self, rewards_per_func: np.ndarray) -> np.ndarray:
        """The allocator's reward per rollout from TRL's rewards per function: (R, F) -> (R,)."""
        names = list(self.reward_func_names)
        if callable(self.allocator_reward):
            out = np.asarray(
                self.allocator_reward(rewards_per_func, names), dtype=np.float64
            ).reshape(-1)
            if out.shape != (len(rewards_per_func),):
                raise ValueError(
                    f"allocator_reward returned shape {out.shape}, expected ({len(rewards_per_func)},)"
                )
            return out
        unscorable = np.isnan(rewards_per_func).all(axis=1)  # (R,)
        if isinstance(self.allocator_reward, str):
            out = rewards_per_func[:, names.index(self.allocator_reward)].astype(np.float64)
            unscorable = np.isnan(out)
        else:
            weights = self.reward_weights.detach().cpu().numpy().astype(np.float64)  # (F,)
            out = np.nansum(rewards_per_func.astype(np.float64) * weights[None, :], axis=1)
        out[unscorable] = self.unscorable_reward
        if unscorable.any():
            self._metrics["train"]["rollalloc/unscorable_rollouts"].append(float(unscorable.sum()))
        return out

    def _pop_extra_logs(self, num_rows: int) -> dict[str, list[Any]]:
        """Take the log_extra columns of a round's rows out of TRL's pending logs (re-emitted at replay)."""
        extra = {k: list(v) for k, v in self._pending_extra_logs.items() if len(v) == num_rows}
        self._pending_extra_logs.clear()
        return extra

    # ------------------------------------------------------------------ replay overrides

    def _generate_single_turn(
        self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False
    ):
        if self._in_round:
            num_generations = 1  # each row is its own request entry: no de-duplication by stride
        return super()._generate_single_turn(
            prompt_ids, images, multimodal_fields, num_generations, has_tool_images
        )

    def _generate(self, prompts: list):
        if self._replay is None:
            return super()._generate(prompts)
        records = self._replay
        has_logps = {r.sampling_logps is not None for r in records}
        has_mask = {r.tool_mask is not None for r in records}
        if len(has_logps) > 1 or len(has_mask) > 1:
            raise RuntimeError(
                "RollallocGRPOTrainer: the trained batch mixes rollouts with and without sampling log-probs or "
                "tool masks (the generation backend changed between steps?)"
            )
        return (
            [list(r.prompt_ids) for r in records],
            [list(r.completion_ids) for r in records],
            [list(r.tool_mask) for r in records] if has_mask == {True} else None,
            [r.completion for r in records],
            [list(r.sampling_logps) for r in records] if has_logps == {True} else None,
            {},
            None,
            [],
        )

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        if self._replay is None:
            return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        columns = sorted({k for r in self._replay for k in r.extra})
        for (
            column
        ) in columns:  # TRL flushes these into its completion table beside the trained rows
            self._pending_extra_logs[column].extend(r.extra.get(column) for r in self._replay)
        rewards = np.stack([r.rewards_per_func for r in self._replay])  # (R, F)
        return torch.as_tensor(rewards, dtype=torch.float32, device=self.accelerator.device)

    # ------------------------------------------------------------------ metrics

    def _log_allocator_metrics(self, batch: TrainBatch) -> None:
        m = self._metrics["train"]
        s = batch.stats
        self.step_stats.append({**s.to_dict(), "global_step": int(self.state.global_step)})
        m["rollalloc/rollouts"].append(float(s.rollouts))
        for phase, count in s.rollouts_by_phase.items():
            m[f"rollalloc/rollouts/{phase}"].append(float(count))
        m["rollalloc/discarded_rollouts"].append(float(s.discarded_rollouts))
        m["rollalloc/rounds"].append(float(s.rounds))
        m["rollalloc/effective_prompt_ratio"].append(float(s.effective_prompt_ratio))
        m["rollalloc/mean_group_reward_var"].append(float(s.mean_group_reward_var))
        for key, value in s.decisions.items():
            m[f"rollalloc/decisions/{key}"].append(float(value))
        for key, value in s.extra.items():
            m[f"rollalloc/{key}"].append(float(value))
        # running totals: the latest value, not a mean over the logging window
        m["rollalloc/cum_rollouts"] = [float(self.allocator.cum_rollouts)]
        m["rollalloc/cum_tokens"] = [float(getattr(self.allocator, "cum_tokens", 0))]
        m["rollalloc/stored_rollouts"] = [float(len(self.rollout_store))]
        m["rollalloc/epoch"] = [float(s.epoch)]

    # ------------------------------------------------------------------ checkpoints

    def _save_checkpoint(self, model, trial):
        super()._save_checkpoint(model, trial)
        if not self.args.should_save:
            return
        checkpoint = os.path.join(
            self._get_output_dir(trial=trial), f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        )
        save_rollalloc_state(os.path.join(checkpoint, CHECKPOINT_SUBDIR), self)

    def _load_optimizer_and_scheduler(self, checkpoint):
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is None:
            return
        directory = os.path.join(checkpoint, CHECKPOINT_SUBDIR)
        if not os.path.isdir(directory):
            raise FileNotFoundError(
                f"{type(self).__name__}: {checkpoint} has no {CHECKPOINT_SUBDIR}/ folder (allocator state and stored "
                "rollouts); it was not written by this trainer. Start without resume_from_checkpoint instead."
            )
        load_rollalloc_state(directory, self)


def save_rollalloc_state(directory: str, trainer: RollallocGRPOTrainer) -> None:
    """Write the allocator state, the rollout store and a meta file into `directory`."""
    from rollalloc.state import save_state

    os.makedirs(directory, exist_ok=True)
    state = trainer.allocator.state_dict()
    live = np.asarray(state["live"], dtype=np.int64)
    stored = trainer.rollout_store.live_handles()
    if not np.array_equal(np.sort(live), stored):
        raise RuntimeError(
            f"{type(trainer).__name__}: the allocator refers to {len(live)} handles, the rollout store holds "
            f"{len(stored)}; refusing to write an inconsistent checkpoint"
        )
    save_state(os.path.join(directory, "allocator.npz"), state)
    trainer.rollout_store.save(directory)
    meta = {
        "format": META_FORMAT,
        "global_step": int(trainer.state.global_step),
        "rollouts_generated": int(trainer.rollouts_generated),
        "cum_rollouts": int(trainer.allocator.cum_rollouts),
        "num_prompts": len(trainer.train_dataset),
        "reward_func_names": list(trainer.reward_func_names),
    }
    with open(os.path.join(directory, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)


def load_rollalloc_state(directory: str, trainer: RollallocGRPOTrainer) -> None:
    """Restore what `save_rollalloc_state` wrote; checks it fits this trainer's dataset and rewards."""
    from rollalloc.state import load_state

    meta_path = os.path.join(directory, "meta.json")
    try:
        with open(meta_path) as f:
            meta = json.load(f)
    except FileNotFoundError:
        raise ValueError(f"{meta_path}: missing; not a rollalloc TRL checkpoint") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{meta_path}: damaged, not JSON ({e})") from None
    if not isinstance(meta, dict) or not {"num_prompts", "reward_func_names"} <= set(meta):
        raise ValueError(f"{meta_path}: damaged, lacks num_prompts / reward_func_names")
    if meta.get("format") != META_FORMAT:
        raise ValueError(f"{directory}: format {meta.get('format')!r}, expected {META_FORMAT!r}")
    if meta["num_prompts"] != len(trainer.train_dataset):
        raise ValueError(
            f"{directory}: saved with a train_dataset of {meta['num_prompts']} prompts, "
            f"this trainer has {len(trainer.train_dataset)}"
        )
    if meta["reward_func_names"] != list(trainer.reward_func_names):
        raise ValueError(
            f"{directory}: saved with reward functions {meta['reward_func_names']}, "
            f"this trainer has {list(trainer.reward_func_names)}"
        )
    store = RolloutStore.load(directory)
    state = load_state(os.path.join(directory, "allocator.npz"))
    live = np.sort(np.asarray(state["live"], dtype=np.int64))
    if not np.array_equal(live, store.live_handles()):
        missing = np.setdiff1d(live, store.live_handles())
        raise ValueError(
            f"{directory}: the allocator state refers to {len(live)} handles, the rollout store holds "
            f"{len(store)} ({len(missing)} missing); the checkpoint is incomplete"
        )
    trainer.allocator.load_state_dict(state)
    if int(trainer.allocator.cum_rollouts) != meta["cum_rollouts"]:
        raise ValueError(f"{directory}: allocator state and meta.json disagree on cum_rollouts")
    trainer.rollout_store = store
    trainer.rollouts_generated = int(meta["rollouts_generated"])


def _likelihoods(logprobs, completion_ids, tool_mask) -> dict:
    """Outcome's `logprob` and `completion_key` from TRL's sampling log-probs (vLLM generation), so
    that the allocator knows the completions' probability mass (rollalloc.likelihood); none when
    TRL has no log-probs, a token's is missing, or with tools (tool output tokens were not
    sampled)."""
    if logprobs is None or tool_mask is not None:
        return {}
    try:  # vLLM may leave a token's log-prob out (None): then none for this request
        lp = np.array([float(np.sum(np.asarray(x, dtype=np.float64))) for x in logprobs])
    except (TypeError, ValueError):
        return {}
    if not np.all(np.isfinite(lp)):
        return {}
    return {
        "logprob": lp,
        "completion_key": completion_keys(completion_ids),
    }
