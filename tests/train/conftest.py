from __future__ import annotations

import copy

import pytest
import torch

from rollalloc.train.config import SMOKE_TESTBED


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("warmcache"))


@pytest.fixture
def small_config(cache_dir, tmp_path):
    torch.set_num_threads(1)

    def make(**over):
        from rollalloc.train.config import config_from_dict, merge

        d = merge(
            copy.deepcopy(SMOKE_TESTBED), {"cache_dir": cache_dir, "out": str(tmp_path / "run")}
        )
        return config_from_dict(merge(d, over))

    return make
