"""Fault injection: SIGKILL `rollalloc train` at random moments, resume until done, and check the
result is identical to an uninterrupted run (docs/reliability.md).

    nice -n 10 python benchmarks/fault_injection.py --trials 20 --out runs/fault_injection

Each trial starts a tiny Pilot-Commit run (non-empty replay buffer, a checkpoint every step,
`--threads 1`) and kills it 1-3 times, each kill chosen at random among three kinds:
  time        after a random delay since the process started (startup, a step, a write, ...)
  checkpoint  while a checkpoint is being written (ROLLALLOC_CHECKPOINT_PAUSE_S makes every write
              pause after each file; the kill lands at a random point of one write)
  step        right after a random number of steps.jsonl lines were logged
After every kill every checkpoint directory must verify against its manifest and a resume point
must exist (unless the kill came before the first checkpoint). The run is then resumed until it
finishes, and its final parameters, optimizer/RNG state, allocator state, rollout buffer and
steps.jsonl / evals.jsonl (timing fields dropped) must equal the uninterrupted run's. Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from rollalloc.train.config import SMOKE_TESTBED

TINY = {
    **SMOKE_TESTBED,
    "task": "arith",
    "strategy": "pilot-commit",
    "strategy_config": {"on_max_rounds": "train"},
    "checkpoint_every": 1,
    "keep_checkpoints": 2,
}
TIMING = ("gen_s", "update_s", "wall_s")
PAUSE_S = 0.04  # per file of a checkpoint (5 pauses per write)


def write_config(workdir: Path, max_steps: int) -> Path:
    cfg = dict(TINY, max_steps=max_steps, cache_dir=str(workdir / "cache"))
    path = workdir / "config.json"
    path.write_text(json.dumps(cfg))
    return path


def launch(config: Path, out: Path, resume: bool) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "rollalloc.cli", "train", "--config", str(config)]
    cmd += ["--out", str(out), "--no-progress"] + (["--resume"] if resume else [])
    env = dict(os.environ, ROLLALLOC_CHECKPOINT_PAUSE_S=str(PAUSE_S), PYTHONHASHSEED="0")
    log = open(out.parent / f"{out.name}.log", "a")
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def _writing(out: Path) -> bool:
    root = out / "checkpoints"
    return root.is_dir() and any(p.name.startswith(".step-") for p in root.iterdir())


def kill_at(proc: subprocess.Popen, out: Path, kind: str, rng: random.Random, span: float) -> bool:
    """SIGKILL `proc` at a moment of kind `kind`; False if it finished first."""
    t0 = time.perf_counter()
    if kind == "time":
        deadline = t0 + rng.uniform(0.0, span)
        while time.perf_counter() < deadline and proc.poll() is None:
            time.sleep(0.005)
    elif kind == "checkpoint":
        skip = rng.randrange(3)  # not always the first write this process makes
        seen = False
        while proc.poll() is None:
            w = _writing(out)
            if w and not seen:
                if skip == 0:
                    time.sleep(rng.uniform(0.0, 5 * PAUSE_S))
                    break
                skip -= 1
            seen = w
            time.sleep(0.002)
    else:  # step
        target = _lines(out / "steps.jsonl") + rng.randrange(1, 4)
        while proc.poll() is None and _lines(out / "steps.jsonl") < target:
            time.sleep(0.002)
    if proc.poll() is not None:
        return False
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return True


def check_checkpoints(out: Path) -> dict[str, Any]:
    """Every checkpoint directory verifies, and a resume point exists if any does."""
    from rollalloc.train.checkpoint import (
        CheckpointError,
        list_checkpoints,
        resumable_checkpoint,
        verify_checkpoint,
    )

    bad = []
    dirs = list_checkpoints(out)
    for _, p in dirs:
        try:
            verify_checkpoint(p)
        except CheckpointError as e:
            bad.append(str(e))
    try:
        resume_from = resumable_checkpoint(out, log=None)
    except CheckpointError as e:
        bad.append(str(e))
        resume_from = None
    if dirs and resume_from is None:
        bad.append("checkpoints exist but none is resumable")
    return {
        "unreadable": bad,
        "checkpoints": len(dirs),
        "mid_write": _writing(out),
        "resume_step": int(resume_from.name.split("-")[1]) if resume_from else None,
    }


def final_state(out: Path) -> dict[str, Any]:
    import torch
    from safetensors.numpy import load_file

    from rollalloc.state import load_state
    from rollalloc.train.checkpoint import resumable_checkpoint

    ckpt = resumable_checkpoint(out, log=None)

    def read(name: str, drop: tuple[str, ...]) -> list[dict[str, Any]]:
        recs = [json.loads(x) for x in (out / name).read_text().splitlines()]
        return [{k: v for k, v in r.items() if k not in drop} for r in recs]

    return {
        "step": ckpt.name,
        "model": load_file(str(ckpt / "model.safetensors")),
        "trainer": torch.load(ckpt / "trainer.pt", weights_only=True),
        "rollouts": load_file(str(ckpt / "rollouts.safetensors")),
        "allocator": load_state(ckpt / "allocator.npz"),
        "steps": read("steps.jsonl", TIMING),
        "evals": read("evals.jsonl", TIMING),
    }


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Paths at which two nested states differ (arrays and tensors compared exactly)."""
    import torch

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        same = isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and torch.equal(a, b)
        return [] if same else [path]
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return [] if np.array_equal(a, b, equal_nan=True) else [path]
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return [f"{path} keys {sorted(set(a) ^ set(b))}"]
        return [d for k in a for d in differences(a[k], b[k], f"{path}/{k}")]
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return [f"{path} length {len(a)} != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}/{i}")]
    if isinstance(a, float) and isinstance(b, float) and np.isnan(a) and np.isnan(b):
        return []
    return [] if a == b else [path]


def run_to_end(config: Path, out: Path, kills: list[str], rng: random.Random, span: float):
    """Start, kill once per entry of `kills`, then resume without kills until the run finishes."""
    events = []
    resume = False
    for kind in kills:
        proc = launch(config, out, resume)
        killed = kill_at(proc, out, kind, rng, span)
        if not killed:
            if proc.returncode != 0:
                raise RuntimeError(f"{out}: run exited {proc.returncode} (see {out}.log)")
            events.append({"kind": kind, "killed": False})
            return events
        events.append({"kind": kind, "killed": True, **check_checkpoints(out)})
        resume = True
    for _ in range(3):  # a run never killed must finish first time; retry only unexpected exits
        proc = launch(config, out, resume)
        if proc.wait() == 0:
            return events
        resume = True
    raise RuntimeError(f"{out}: the resumed run failed (see {out}.log)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--max-steps", type=int, default=6)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="runs/fault_injection")
    args = ap.parse_args(argv)

    work = Path(args.out).resolve()
    work.mkdir(parents=True, exist_ok=True)
    config = write_config(work, args.max_steps)
    rng = random.Random(args.seed)

    t0 = time.perf_counter()
    ref_out = work / "reference"
    if not (ref_out / "run.json").is_file():
        run_to_end(config, ref_out, [], rng, 0.0)  # builds the warm-start cache too
    t1 = time.perf_counter()
    ref_span = 0.0
    proc = launch(config, work / "timing", False)  # how long a full (cached) run takes
    proc.wait()
    ref_span = time.perf_counter() - t1
    reference = final_state(ref_out)

    trials = []
    for t in range(args.trials):
        out = work / f"trial-{t:03d}"
        if out.exists():
            import shutil

            shutil.rmtree(out)
        kinds = [rng.choice(["time", "checkpoint", "step"]) for _ in range(rng.randint(1, 3))]
        events = run_to_end(config, out, kinds, rng, ref_span)
        diff = differences(reference, final_state(out))
        unreadable = [u for e in events for u in e.get("unreadable", [])]
        trials.append(
            {
                "trial": t,
                "events": events,
                "kills": sum(e["killed"] for e in events),
                "identical": not diff,
                "differences": diff[:10],
                "unreadable": unreadable,
            }
        )
        print(json.dumps({k: v for k, v in trials[-1].items() if k != "events"}), file=sys.stderr)

    kills = [e for tr in trials for e in tr["events"] if e["killed"]]
    result = {
        "trials": len(trials),
        "kills": len(kills),
        "kills_by_kind": {
            k: sum(e["kind"] == k for e in kills) for k in ("time", "checkpoint", "step")
        },
        "kills_mid_checkpoint_write": sum(e["mid_write"] for e in kills),
        "kills_before_first_checkpoint": sum(e["resume_step"] is None for e in kills),
        "identical": sum(tr["identical"] for tr in trials),
        "with_unreadable_checkpoint": sum(bool(tr["unreadable"]) for tr in trials),
        "max_steps": args.max_steps,
        "uninterrupted_run_s": round(ref_span, 1),
        "total_s": round(time.perf_counter() - t0, 1),
        "ok": all(tr["identical"] and not tr["unreadable"] for tr in trials),
    }
    (work / "result.json").write_text(json.dumps({**result, "per_trial": trials}, indent=1))
    print(json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
