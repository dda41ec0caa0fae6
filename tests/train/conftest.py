from __future__ import annotations

import copy

import pytest
import torch

SMALL = {
    "task_config": {"num_train": 96, "num_eval": 32, "terms": [2]},
    "tiny": {
        "hidden_size": 32,
        "num_layers": 1,
        "num_heads": 2,
        "intermediate_size": 64,
        "max_positions": 32,
    },
    "warm_start": {
        "steps": 200,
        "batch_size": 64,
        "lr": 0.01,
        "warmup_steps": 2,
        "histogram_prompts": 16,
        "histogram_samples": 4,
    },
    "train_prompts": 4,
    "group_size": 8,
    "max_new_tokens": 4,
    "eval_every_rollouts": 64,
    "eval_k": 2,
    "threads": 1,
    "progress": False,
    "learner": {"lr": 0.001},
}


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("warmcache"))


@pytest.fixture
def small_config(cache_dir, tmp_path):
    torch.set_num_threads(1)

    def make(**over):
        from rollalloc.train.config import config_from_dict, merge

        d = merge(copy.deepcopy(SMALL), {"cache_dir": cache_dir, "out": str(tmp_path / "run")})
        return config_from_dict(merge(d, over))

    return make
