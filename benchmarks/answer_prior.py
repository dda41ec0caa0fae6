"""Which answers a trained policy favours (docs/simulator.md, "Session 35"): the exact held-out
probability mass on the answers a run's part over-represents, and held-out accuracy on the prompts
whose answer is one of them against every other prompt, under the warm start and under each run's
final checkpoint (teacher forcing, `exact_pass_rates`: no sampling).

    python benchmarks/answer_prior.py WARM_START_DIR RUN_DIR [RUN_DIR ...] [--over-from RUN_DIR]

RUN_DIR is one run (run.json, checkpoints/step-*/); the favoured answers are those at least twice
as common in the run's part as in the pool (5 prompts or more), or in --over-from's part (a random
part's run scored on a chosen part's answers: the control).
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_model

from rollalloc.tasks import load_task, run_pool
from rollalloc.train.evaluator import exact_pass_rates
from rollalloc.train.model import load_policy


def favoured(run: Path, task, ratio: float = 2.0) -> list[str]:
    rj = json.loads((run / "run.json").read_text())
    part = run_pool(rj["config"], rj.get("pool_part")).train["answer"]
    pc, pool = collections.Counter(part), collections.Counter(task.train["answer"])
    n, big = len(part), len(task.train["answer"])
    return sorted(a for a in pc if pc[a] >= 5 and (pc[a] / n) / (pool[a] / big) >= ratio)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("warm")
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--over-from", default=None)
    args = ap.parse_args()
    torch.set_num_threads(1)
    runs = [Path(r) for r in args.runs]
    cfg = json.loads((runs[0] / "run.json").read_text())["config"]
    task = load_task(cfg["task"], cfg.get("task_config"), seed=cfg.get("data_seed", 0))
    prompts, answers = list(task.eval["prompt"]), list(task.eval["answer"])
    model, tok = load_policy(args.warm)
    init = {k: v.clone() for k, v in model.state_dict().items()}

    def report(name: str, over: list[str]) -> None:
        acc = exact_pass_rates(model, tok, prompts, answers, temperature=1.0)
        mass = sum((exact_pass_rates(model, tok, prompts, [a] * len(prompts), temperature=1.0)
                    for a in over), np.zeros(len(prompts)))  # fmt: skip
        on = np.array([t in over for t in answers])
        print(f"  {name}: held-out {acc.mean():.4f}; mass on the favoured answers {mass.mean():.4f} "
              f"(their share of the answers {on.mean():.3f}); accuracy on their prompts "
              f"{acc[on].mean():.4f}, on the others {acc[~on].mean():.4f}")  # fmt: skip

    for run in runs:
        over = favoured(Path(args.over_from) if args.over_from else run, task)
        print(f"{run}: favoured answers {over}")
        model.load_state_dict(init)
        report("warm start", over)
        ckpt = sorted((run / "checkpoints").glob("step-*"))[-1]
        load_model(model, str(ckpt / "model.safetensors"))
        report(ckpt.name, over)


if __name__ == "__main__":
    main()
