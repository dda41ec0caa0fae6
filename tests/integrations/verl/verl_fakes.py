"""Test doubles for the parts of verl that need GPUs: the rollout servers (vLLM/SGLang) and the FSDP
actor workers. Everything else the tests touch is verl's real code (DataProto, config, trainer,
advantages, reward extraction, metrics, checkpoint files, logger).

The fake policy: prompt i is solved with probability sigmoid(skill * 1.5 + difficulty_i), where
`skill` grows by `lr` per actor update. Rollouts are deterministic given (global step, call in step,
prompt rows), so a resumed run generates exactly what an uninterrupted one does.
"""

from __future__ import annotations

import json
import os

import numpy as np
import torch
from tensordict import TensorDict
from torch.utils.data import Dataset
from verl import DataProto

PROMPT_LEN = 4
RESPONSE_LEN = 6


class PromptDataset(Dataset):
    """Items shaped as verl's RLHFDataset yields them (0.9.x: no token ids; the agent loop tokenizes)."""

    def __init__(self, n: int, seed: int = 0):
        rng = np.random.default_rng(seed)
        # difficulty logits: some prompts always solved, some never, most in between
        self.difficulty = np.concatenate(
            [np.full(n // 8, 6.0), np.full(n // 8, -6.0), rng.normal(0.0, 1.0, n - 2 * (n // 8))]
        )
        rng.shuffle(self.difficulty)
        self.n = n
        # a difficulty column under extra_info, as RLHFDataset's `dataframe` holds the parquet's
        self.level = np.select(
            [self.difficulty == 6.0, self.difficulty == -6.0], ["solved", "never"], "mid"
        )
        self.dataframe = {"extra_info": [self._extra(i) for i in range(n)]}

    def _extra(self, i: int) -> dict:
        return {"index": i, "level": str(self.level[i])}

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict:
        return {
            "raw_prompt": [{"role": "user", "content": f"question {i}"}],
            "data_source": "fake/math",
            "reward_model": {"style": "rule", "ground_truth": str(i % 7)},
            "extra_info": self._extra(i),
            "index": i,
            "tools_kwargs": {},
            "interaction_kwargs": {},
            "dummy_tensor": torch.tensor([0], dtype=torch.uint8),
        }


class FakePolicy:
    def __init__(self, difficulty: np.ndarray, lr: float = 0.3):
        self.difficulty = difficulty
        self.lr = lr
        self.skill = 0.0
        self.updates = 0

    def p_solve(self, prompt_ids: np.ndarray) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-(self.skill * 1.5 + self.difficulty[prompt_ids])))


class FakeRolloutManager:
    """Stands in for verl's AgentLoopManager: generate_sequences(DataProto) -> DataProto, one row per
    input row, with token tensors, rm_scores (reward on the last response token) and
    reward_extra_info["acc"], as verl's agent loop + reward loop produce them."""

    def __init__(self, policy: FakePolicy, trainer_ref):
        self.policy = policy
        self.trainer_ref = trainer_ref  # () -> trainer (for global_steps)
        self.calls: list[dict] = []
        self._calls_in_step: dict[int, int] = {}

    def generate_sequences(self, gen_batch: DataProto) -> DataProto:
        step = int(gen_batch.meta_info["global_steps"])
        k = self._calls_in_step.get(step, 0)
        self._calls_in_step = {step: k + 1}
        pids = np.asarray(gen_batch.non_tensor_batch["index"], dtype=np.int64)
        rng = np.random.default_rng([step, k, len(pids), int(pids.sum())])
        p = self.policy.p_solve(pids)
        acc = (rng.random(len(pids)) < p).astype(np.float64)
        lengths = rng.integers(1, RESPONSE_LEN + 1, len(pids))
        b = len(pids)
        prompts = torch.full((b, PROMPT_LEN), 7, dtype=torch.long)
        prompts[:, -1] = torch.as_tensor(pids)  # last prompt token: the prompt id
        responses = torch.zeros((b, RESPONSE_LEN), dtype=torch.long)
        response_mask = torch.zeros((b, RESPONSE_LEN), dtype=torch.long)
        serial = torch.arange(b) + 1000 * (len(self.calls) + 1)
        for r in range(b):
            responses[r, : lengths[r]] = 11
            responses[r, 0] = serial[r]  # first response token: a unique serial of this rollout
            response_mask[r, : lengths[r]] = 1
        rm_scores = torch.zeros((b, RESPONSE_LEN), dtype=torch.float32)
        rm_scores[torch.arange(b), torch.as_tensor(lengths - 1)] = torch.as_tensor(
            acc, dtype=torch.float32
        )
        attention_mask = torch.cat(
            [torch.ones((b, PROMPT_LEN), dtype=torch.long), response_mask], dim=1
        )
        td = TensorDict(
            {
                "prompts": prompts,
                "responses": responses,
                "response_mask": response_mask,
                "input_ids": torch.cat([prompts, responses], dim=1),
                "attention_mask": attention_mask,
                "position_ids": torch.cumsum(attention_mask, dim=1) - 1,
                "rm_scores": rm_scores,
            },
            batch_size=(b,),
        )
        self.calls.append({"step": step, "rows": b, "prompt_ids": pids.copy()})
        return DataProto(
            batch=td,
            non_tensor_batch={"acc": acc, "__num_turns__": np.full(b, 2, dtype=np.int64)},
            meta_info={"reward_extra_keys": ["acc"], "timing": {"generate_sequences": 0.01}},
        )


class FakeActorWorkerGroup:
    """Stands in for verl's FSDP actor worker group: saves/loads the fake policy with the checkpoint."""

    world_size = 1

    def __init__(self, policy: FakePolicy):
        self.policy = policy
        self.saved: list[str] = []

    def save_checkpoint(self, local_path, hdfs_path=None, global_step=0, max_ckpt_to_keep=None):
        os.makedirs(local_path, exist_ok=True)
        with open(os.path.join(local_path, "fake_policy.json"), "w") as f:
            json.dump({"skill": self.policy.skill, "updates": self.policy.updates}, f)
        self.saved.append(local_path)

    def load_checkpoint(self, local_path, del_local_after_load=False):
        with open(os.path.join(local_path, "fake_policy.json")) as f:
            s = json.load(f)
        self.policy.skill, self.policy.updates = s["skill"], s["updates"]


class FakeCheckpointManager:
    """verl's CheckpointEngineManager syncs actor weights into the rollout replicas; nothing to sync."""

    def __init__(self):
        self.synced: list[int] = []

    def update_weights(self, global_steps):
        self.synced.append(int(global_steps))

    def sleep_replicas(self):
        pass


class FakeResourcePoolManager:
    def get_n_gpus(self) -> int:
        return 1


def make_trainer_class():
    """RollallocRayPPOTrainer whose two worker calls are replaced: old log-probs (uniform over a
    vocabulary of 32) and the actor update (raises `skill` by lr x mean advantage of correct rollouts,
    records every batch it was given)."""
    from rollalloc.integrations.verl.trainer import RollallocRayPPOTrainer

    class TestTrainer(RollallocRayPPOTrainer):
        def _compute_old_log_prob(self, batch):
            resp = batch.batch["responses"]
            lp = torch.full(resp.shape, -np.log(32.0), dtype=torch.float32)
            ent = torch.full(resp.shape, np.log(32.0), dtype=torch.float32)
            return DataProto.from_single_dict({"old_log_probs": lp, "entropys": ent}), 0.0

        def _update_actor(self, batch):
            adv = batch.batch["advantages"]  # (R, T), zero outside the response
            mask = batch.batch["response_mask"].bool()
            seq_adv = (adv * mask).sum(-1) / mask.sum(-1).clamp(min=1)  # (R,)
            acc = torch.as_tensor(np.asarray(batch.non_tensor_batch["acc"], dtype=np.float32))
            signal = float(
                (seq_adv * acc).mean()
            )  # > 0 when correct rollouts get positive advantage
            self.policy.skill += self.policy.lr * max(signal, 0.0)
            self.policy.updates += 1
            self.updates_seen.append(
                {
                    "step": self.global_steps,
                    "uids": list(batch.non_tensor_batch["uid"]),
                    "rows": len(batch),
                    "signal": signal,
                    "advantages": seq_adv.numpy().copy(),
                }
            )
            return DataProto.from_single_dict(
                data={}, meta_info={"metrics": {"actor/pg_loss": -signal, "actor/grad_norm": 1.0}}
            )

    return TestTrainer


def compose_config(overrides: list[str]):
    from hydra import compose, initialize_config_dir

    from rollalloc.integrations.verl.main import CONFIG_DIR

    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        return compose(config_name="rollalloc_trainer", overrides=overrides)


def build_trainer(tmp_path, overrides: list[str], pool: int = 64, policy: FakePolicy | None = None):
    """A trainer on fakes for the GPU parts, verl's real code for the rest; no Ray."""
    from verl.trainer.ppo.utils import Role
    from verl.utils.dataset.rl_dataset import collate_fn

    config = compose_config(
        [
            "actor_rollout_ref.model.path=unused",
            f"trainer.default_local_dir={tmp_path}/ckpt",
            "trainer.logger=[file]",
            "trainer.val_before_train=false",
            "trainer.test_freq=-1",
            "trainer.balance_batch=false",
            "trainer.device=cpu",
            "algorithm.adv_estimator=grpo",
            "actor_rollout_ref.actor.use_kl_loss=false",
            "algorithm.use_kl_in_reward=false",
            *overrides,
        ]
    )
    dataset = PromptDataset(pool)
    policy = policy or FakePolicy(dataset.difficulty)
    cls = make_trainer_class()
    trainer = cls(
        config=config,
        tokenizer=None,
        role_worker_mapping={Role.ActorRollout: object},
        resource_pool_manager=FakeResourcePoolManager(),
        train_dataset=dataset,
        val_dataset=PromptDataset(8, seed=1),
        collate_fn=collate_fn,
        device_name="cpu",
    )
    trainer.policy = policy
    trainer.updates_seen = []
    trainer.actor_rollout_wg = FakeActorWorkerGroup(policy)
    trainer.async_rollout_manager = FakeRolloutManager(policy, lambda: trainer)
    trainer.checkpoint_manager = FakeCheckpointManager()
    return trainer
