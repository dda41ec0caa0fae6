"""verl end to end on CPUs, nothing faked: RollallocRayPPOTrainer on 2 Ray worker processes (FSDP2 on
gloo), real generation (hf_cpu rollout server), real weight sync, verl's reward manager and advantage
estimator, a tiny warm-started Qwen2 on the arith task (rollalloc.integrations.verl.cpu_run).

Each run is a fresh `python -m rollalloc.integrations.verl.cpu_run` process (its own Ray cluster);
the verl plugins (cpu platform, hf_cpu backend) load through the `verl.plugins` entry points."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rollalloc.integrations.verl.hf_rollout import (
    LOG_ENV,
    SKIP_SYNC_ENV,
    read_events,
    sync_violations,
)

WARM_STEPS = 150
NUM_TRAIN = 256
ROOT = Path(__file__).resolve().parents[3]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VERL_", "ROLLALLOC_HF_CPU"))}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    """The arith data and the warm-started tiny model, built once and copied into each run."""
    base = tmp_path_factory.mktemp("verl-cpu-base")
    code = (
        "from rollalloc.integrations.verl.cpu_run import prepare; "
        f"prepare({str(base)!r}, num_train={NUM_TRAIN}, warm_steps={WARM_STEPS})"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=_env(OMP_NUM_THREADS="1"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return base


def _run(prepared: Path, workdir: Path, strategy: str, steps: int, *verl: str, **env: str):
    """One cpu_run process; returns (metrics per step, hf_cpu events)."""
    if not (workdir / "prepared.json").exists():
        shutil.copytree(prepared, workdir, dirs_exist_ok=True)
    log = workdir / f"metrics-{len(list(workdir.glob('metrics-*')))}.jsonl"
    events = workdir / f"hf-{len(list(workdir.glob('hf-*')))}.jsonl"
    cmd = [
        sys.executable,
        "-m",
        "rollalloc.integrations.verl.cpu_run",
        f"--workdir={workdir}",
        f"--strategy={strategy}",
        f"--steps={steps}",
        f"--warm-steps={WARM_STEPS}",
        f"--num-train={NUM_TRAIN}",
        "--",
        "trainer.logger=[file]",
        *verl,
    ]
    out = subprocess.run(
        cmd,
        cwd=ROOT,
        env=_env(VERL_FILE_LOGGER_PATH=str(log), **{LOG_ENV: str(events)}, **env),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, (out.stdout + out.stderr)[-6000:]
    metrics = [json.loads(line)["data"] for line in log.read_text().splitlines()]
    return metrics, read_events(str(events))


def _generated(events) -> int:
    return sum(e["n"] for e in events if e["event"] == "generate")


def test_cpu_platform_and_rollout_resolve_in_a_fresh_process():
    code = (
        "import verl\n"
        "from verl.plugin.platform import PlatformRegistry, get_platform\n"
        "from verl.utils.device import get_device_name, get_nccl_backend, get_resource_name\n"
        "from verl.workers.rollout.base import get_rollout_class\n"
        "from verl.workers.rollout.replica import RolloutReplicaRegistry\n"
        "p = get_platform()\n"
        "print(get_device_name(), get_nccl_backend(), get_resource_name(), type(p).__name__,\n"
        "      RolloutReplicaRegistry.get('hf_cpu').__name__, get_rollout_class('hf_cpu').__name__,\n"
        "      PlatformRegistry.get('cpu')().is_platform_available(use_smi_check=True))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=_env(VERL_PLATFORM="cpu"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    # selected by VERL_PLATFORM only: never auto-detected (a GPU job's CPU-only actor stays on GPU)
    assert out.stdout.split() == [
        "cpu",
        "gloo",
        "GPU",
        "PlatformCPU",
        "HFCPUReplica",
        "HFServerAdapter",
        "False",
    ]


def test_pilot_commit_end_to_end_checkpoint_and_identical_resume(prepared, tmp_path):
    """4 steps uninterrupted (checkpoints at 2 and 4), then a second run resumed from step 2: steps
    3-4 repeat (allocator decisions, rewards, losses, and the trained weights)."""
    # 8 x train_prompts new prompts piloted per round (the default is 3 x): enough survivors that
    # the buffer holds a whole batch by step 2 whatever this machine's floats make of the pilots
    # (with 3 x, 7 of 24 pilots were kept at step 1 on one machine: the buffer never held 4, every
    # step took two rounds, and the binding below was never exercised)
    gen = "rollalloc.pilot_commit.gen_prompts=32"
    whole, ev_whole = _run(prepared, tmp_path / "pc", "pilot-commit", 4, gen, "trainer.save_freq=2")
    assert [m["training/global_step"] for m in whole] == [1, 2, 3, 4]
    ckpt = tmp_path / "pc" / "ckpt" / "global_step_2"
    assert (ckpt / "rollalloc" / "allocator.npz").is_file()
    assert (ckpt / "actor" / "model_world_size_2_rank_1.pt").is_file()  # FSDP2 shards of 2 ranks
    # every generated rollout is one the allocator counted (agent.num_workers=1: no padding)
    assert _generated(ev_whole) == whole[-1]["rollalloc/cum_rollouts"]
    # the weights that generate step t+1 are the weights trained at step t
    assert sync_violations(ev_whole) == []
    actor = [e for e in ev_whole if e["event"] == "actor"]
    assert [e["global_steps"] for e in actor] == [0, 1, 2, 3, 4] and len(
        {e["weights"] for e in actor}
    ) == 5
    # Pilot-Commit binds pilots of new prompts and commits of buffered ones in one generation pass
    assert any(
        m["rollalloc/rounds"] == 1
        and m.get("rollalloc/rollouts_by_phase/pilot", 0) > 0
        and m.get("rollalloc/rollouts_by_phase/commit", 0) > 0
        for m in whole
    )
    assert all(m["rollalloc/effective_prompt_ratio"] == 1.0 for m in whole)
    assert all(0 < m["critic/score/mean"] < 1 for m in whole)  # real rewards from verl's manager

    resumed, ev_resumed = _run(
        prepared,
        tmp_path / "pc",
        "pilot-commit",
        4,
        gen,
        "trainer.save_freq=-1",
        "trainer.resume_mode=resume_path",
        f"trainer.resume_from_path={ckpt}",
    )
    assert [m["training/global_step"] for m in resumed] == [3, 4]
    for a, b in zip(whole[2:], resumed):
        for key in a:
            if key.startswith(("rollalloc/", "critic/", "response_length/")) or key in (
                "actor/pg_loss",
                "actor/grad_norm",
            ):
                # counts are exact; losses within float noise (rows of identical prompts may
                # swap between runs, and sums reorder)
                assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-7), key
    assert sync_violations(ev_resumed) == []
    # the trained weights repeat too: bit for bit at the restored step, then within float noise
    # (~1e-9 relative seen, 1e-6 allowed: the server seeds rollouts per prompt in arrival order,
    # so rows of identical prompts may swap and sums run in another order); a step moves ~1e-3
    a_whole = {e["global_steps"]: e for e in ev_whole if e["event"] == "actor"}
    a_resumed = {e["global_steps"]: e for e in ev_resumed if e["event"] == "actor"}
    assert sorted(a_resumed) == [2, 3, 4]
    assert a_resumed[2]["weights"] == a_whole[2]["weights"]
    for step in (3, 4):
        for key in ("weights_sum", "weights_sq"):
            assert a_resumed[step][key] == pytest.approx(a_whole[step][key], rel=1e-6), (step, key)
            assert a_whole[step][key] != pytest.approx(a_whole[step - 1][key], rel=1e-5)


def test_dapo_end_to_end(prepared, tmp_path):
    metrics, events = _run(prepared, tmp_path / "dapo", "dapo", 2)
    assert [m["training/global_step"] for m in metrics] == [1, 2]
    assert sync_violations(events) == []
    assert _generated(events) == metrics[-1]["rollalloc/cum_rollouts"]
    # fresh rollouts only: the actor's old log-probs equal the server's sampling log-probs
    assert all(m["training/rollout_probs_diff_max"] < 1e-4 for m in metrics)
    # dynamic sampling trains only groups with a reward signal
    assert all(m["rollalloc/effective_prompt_ratio"] == 1.0 for m in metrics)


def test_grpo_end_to_end_and_a_skipped_weight_sync_is_caught(prepared, tmp_path):
    """GRPO with the adapter draining the actor's weights but not shipping them: the run completes,
    and both checks the other runs pass (weights of each generation, rollout vs actor log-probs)
    fail from the first step trained on stale weights."""
    metrics, events = _run(prepared, tmp_path / "skip", "grpo", 2, **{SKIP_SYNC_ENV: "1"})
    assert [m["training/global_step"] for m in metrics] == [1, 2]
    assert _generated(events) == metrics[-1]["rollalloc/cum_rollouts"]
    problems = sync_violations(events)
    assert any("sync of step 1" in p for p in problems), problems
    assert metrics[0]["training/rollout_probs_diff_max"] < 1e-4  # step 1: initial weights, same
    assert metrics[1]["training/rollout_probs_diff_max"] > 1e-3  # step 2: stale server weights
