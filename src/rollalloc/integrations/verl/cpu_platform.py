"""A verl platform for machines without an accelerator: device "cpu", collectives on gloo.

verl 0.9.x resolves its device through `verl.plugin.platform.get_platform()`; with no accelerator it
falls back to "nvidia" (device "cuda", backend "nccl"), so nothing distributed runs on a CPU. This
module registers a platform named `cpu` with verl's own `PlatformRegistry`; it is selected only
explicitly, with `VERL_PLATFORM=cpu` in every process (the launcher's `cpu_env()` sets it before
Ray starts, so Ray's workers inherit it), never by auto-detection, so installing rollalloc changes
nothing on a GPU machine.

It is loaded in every Python process that imports verl through the `verl.plugins` entry-point group
(pyproject.toml; verl/__init__.py loads that group), or with
`VERL_USE_EXTERNAL_MODULES=rollalloc.integrations.verl.cpu_platform`.

- device "cpu", backend "gloo"; its device module is torch.cpu plus no-op stand-ins for the
  accelerator memory/stream calls verl makes (memory_reserved, mem_get_info, ...); allocator and
  profiler hooks are no-ops; no IPC, no CUDA runtime.
- Ray resource "GPU": verl's `ResourcePoolManager` places its workers on "GPU" bundles (it
  hard-codes `use_gpu=True`), so the launcher starts Ray with as many *logical* GPUs as worker
  processes (`ray_kwargs.ray_init.num_gpus`); torch never sees them.
- verl registers its FSDP engine for devices "cuda" and "npu" only; `VERL_ENGINE_DEVICE=cuda`
  (also set by `cpu_env()`) makes `EngineRegistry` pick that same engine, which then runs on the
  device this platform names.
"""

from __future__ import annotations

import os
import types
from contextlib import contextmanager
from typing import Any

import torch
from verl.plugin.platform import PlatformBase, PlatformRegistry

PLATFORM_NAME = "cpu"


class _CPUDeviceModule(types.ModuleType):
    """What verl calls on `get_torch_device()` (the torch.<device> namespace), for the CPU: torch.cpu
    where it has the function, no-ops for the accelerator memory/stream/IPC calls it lacks
    (memory_reserved, mem_get_info, reset_peak_memory_stats, ipc_collect, ...)."""

    def __init__(self):
        super().__init__("rollalloc_cpu_device")

    def __getattr__(self, name: str):
        return getattr(torch.cpu, name)

    @staticmethod
    def is_available() -> bool:
        return True

    @staticmethod
    def device_count() -> int:
        return 1

    @staticmethod
    def current_device() -> torch.device:
        return torch.device("cpu")

    @staticmethod
    def get_device_name(device: Any = None) -> str:
        return "cpu"

    @staticmethod
    def set_device(device: Any) -> None:
        pass

    @staticmethod
    def synchronize(device: Any = None) -> None:
        pass

    @staticmethod
    def empty_cache() -> None:
        pass

    @staticmethod
    def ipc_collect() -> None:
        pass

    @staticmethod
    def set_per_process_memory_fraction(fraction: float, device: Any = None) -> None:
        pass

    @staticmethod
    def mem_get_info(device: Any = None) -> tuple[int, int]:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        avail = os.sysconf("SC_AVPHYS_PAGES")
        return avail * size, pages * size

    @staticmethod
    def memory_allocated(device: Any = None) -> int:
        return 0

    memory_reserved = max_memory_allocated = max_memory_reserved = memory_allocated

    @staticmethod
    def reset_peak_memory_stats(device: Any = None) -> None:
        pass

    reset_accumulated_memory_stats = reset_peak_memory_stats

    @staticmethod
    def get_rng_state(device: Any = None) -> torch.Tensor:
        return torch.get_rng_state()

    @staticmethod
    def set_rng_state(state: torch.Tensor, device: Any = None) -> None:
        torch.set_rng_state(state)

    @staticmethod
    def manual_seed(seed: int) -> None:
        torch.manual_seed(seed)

    manual_seed_all = manual_seed


_DEVICE_MODULE = _CPUDeviceModule()


@PlatformRegistry.register(platform=PLATFORM_NAME)
class PlatformCPU(PlatformBase):
    """verl on CPUs: torch's CPU device, gloo collectives, logical Ray "GPU"s as worker slots."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self):
        return _DEVICE_MODULE

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        # Never auto-detected: a CPU-only Ray actor of a GPU job must still resolve to its GPUs.
        return False

    def current_device(self) -> torch.device:
        # verl uses get_device_id() as a device (`.to(get_device_id())`, `to_empty(device=...)`): an
        # index 0 there would mean cuda:0, so the CPU platform answers with the CPU device itself.
        return torch.device("cpu")

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        pass

    def synchronize(self, device_index: int | None = None) -> None:
        pass

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        pass

    def empty_cache(self) -> None:
        pass

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        # Ray sets it for actors holding (logical) GPUs; torch's CPU build ignores it.
        return "CUDA_VISIBLE_DEVICES"

    @contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        pass

    def profiler_stop(self) -> None:
        pass

    def ray_resource_name(self) -> str:
        return "GPU"

    def ray_resource_options(self, num_gpus: float) -> dict[str, Any]:
        return {"num_gpus": num_gpus}

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None


def cpu_env(num_threads: int = 1) -> dict[str, str]:
    """Environment variables that select this platform in every process of a verl run.

    Set them in the launching process before Ray starts (Ray's local workers inherit its
    environment). `num_threads` caps torch's intra-op threads per process (OMP_NUM_THREADS), so
    that a few worker processes share a small machine without oversubscribing it."""
    return {
        "VERL_PLATFORM": PLATFORM_NAME,
        "VERL_ENGINE_DEVICE": "cuda",  # the FSDP engine is registered under cuda/npu only
        "OMP_NUM_THREADS": str(num_threads),
        "MKL_NUM_THREADS": str(num_threads),
        "TOKENIZERS_PARALLELISM": "false",
    }


def selected() -> bool:
    """True where this process runs verl on this platform."""
    return os.environ.get("VERL_PLATFORM", "").strip().lower() == PLATFORM_NAME


def actor_rollout_worker_cls():
    """verl's `ActorRolloutRefWorker`, joining the process group on gloo alone.

    verl's `TrainingWorker` joins with backend `"cpu:gloo,<device>:<backend>"`
    (verl/utils/distributed.py: initialize_global_process_group_ray), which torch rejects when the
    device is "cpu" ("Duplicate device type cpu"); it skips the call when a group already exists.
    This subclass creates it first, with "gloo" (the launcher's task runner registers it in place of
    verl's class when this platform is selected)."""
    from verl.utils.distributed import initialize_global_process_group_ray
    from verl.workers.engine_workers import ActorRolloutRefWorker

    class CPUActorRolloutRefWorker(ActorRolloutRefWorker):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            initialize_global_process_group_ray(timeout_second=None, backend="gloo")

    return CPUActorRolloutRefWorker
