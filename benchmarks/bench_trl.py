"""rollalloc's trainer (strategy grpo) vs TRL's GRPOTrainer, side by side on the same tiny Qwen2,
task and batch: 64 prompts x 8 completions per optimiser step, one update per batch, no KL,
temperature 1, the same max completion length, 1 torch thread each by default.

    python benchmarks/bench_trl.py [--steps 30] [--repeats 3] [--threads 1] [--json out.json]
                                   [--generic]

Both start from the default testbed's warm-start checkpoint (built/cached by rollalloc). Reported:
completions per second over the timed steps (the first step of each is a warm-up and not timed),
and the split of rollalloc's time into generation and update. The two run one after the other in
the same process, `--repeats` times alternating (ours, TRL, ours, TRL, ...), so that a slow phase of
the shared machine hits both; the claim is the median of the per-repeat ratios.

`--generic` adds a third trainer to each repeat: ours with the Qwen2 fast path turned off (HF
`generate` and the padded HF forward, the trainer before issue 16), for a before/after figure
measured side by side.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time

import torch


def bench_rollalloc(path: str, steps: int, threads: int, fast: bool = True) -> dict:
    from unittest import mock

    from rollalloc.loop import run
    from rollalloc.train import learner, model
    from rollalloc.train.config import LearnerConfig, TrainConfig, WarmStartConfig
    from rollalloc.train.trainer import build_parts

    cfg = TrainConfig(
        model=path,
        warm_start=WarmStartConfig(steps=0),
        max_steps=steps + 1,
        threads=threads,
        progress=False,
        train_prompts=64,
        group_size=8,
        learner=LearnerConfig(num_minibatches=1),  # one optimiser step per batch, as TRL's here
    )
    if fast:
        parts = build_parts(cfg, log=None)
    else:  # the generic Hugging Face path (generate; padded forward) for sampler and learner
        off = lambda m: False  # noqa: E731
        with (
            mock.patch.object(model, "fast_path_supported", off),
            mock.patch.object(learner, "fast_path_supported", off),
        ):
            parts = build_parts(cfg, log=None)
        assert parts.learner.runner is None and parts.sampler.generator.runner is None
    times: list[float] = []
    recs: list[dict] = []
    last = [time.perf_counter()]

    def on_step(rec, state):
        now = time.perf_counter()
        times.append(now - last[0])
        last[0] = now
        recs.append(rec)

    run(parts.allocator, parts.sampler, parts.learner, None, max_steps=steps + 1, on_step=on_step)
    timed = times[1:]
    return {
        "completions_per_s": 512 * len(timed) / sum(timed),
        "median_step_s": statistics.median(timed),
        "median_gen_s": statistics.median(r["gen_s"] for r in recs[1:]),
        "median_update_s": statistics.median(r["update_s"] for r in recs[1:]),
        "mean_effective_prompt_ratio": statistics.mean(r["effective_prompt_ratio"] for r in recs),
    }


def bench_trl(path: str, steps: int, threads: int) -> dict:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from rollalloc.tasks import load_task
    from rollalloc.tasks.arith import arith_reward

    task = load_task("arith", {})
    ds = Dataset.from_dict({"prompt": task.train["prompt"], "answer": task.train["answer"]})
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    times: list[float] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            times.append(time.perf_counter() - self.t0)

    with tempfile.TemporaryDirectory() as out:
        args = GRPOConfig(
            output_dir=out,
            per_device_train_batch_size=512,
            num_generations=8,
            gradient_accumulation_steps=1,
            max_completion_length=8,
            temperature=1.0,
            top_k=0,
            beta=0.0,
            epsilon=0.2,
            epsilon_high=0.28,
            loss_type="dapo",
            learning_rate=1e-5,
            max_steps=steps + 1,
            logging_steps=1000,
            save_strategy="no",
            report_to=[],
            use_cpu=True,
            bf16=False,
            disable_dropout=True,
            seed=0,
            dataloader_num_workers=0,
        )
        trainer = GRPOTrainer(
            model=model,
            args=args,
            reward_funcs=[arith_reward],
            train_dataset=ds,
            processing_class=tok,
            callbacks=[Timer()],
        )
        torch.set_num_threads(threads)
        trainer.train()
    timed = times[1:]
    return {
        "completions_per_s": 512 * len(timed) / sum(timed),
        "median_step_s": statistics.median(timed),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30, help="timed steps per run")
    ap.add_argument("--repeats", type=int, default=3, help="alternating runs of each trainer")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cache-dir", default=".cache/rollalloc", help="warm-start cache")
    ap.add_argument("--json")
    ap.add_argument(
        "--generic",
        action="store_true",
        help="also time our trainer on the generic HF path (the pre-issue-16 trainer)",
    )
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from rollalloc.train.config import TrainConfig
    from rollalloc.train.trainer import build_task, prepare_policy

    cfg = TrainConfig(max_steps=1, progress=False, cache_dir=args.cache_dir)
    path, _ = prepare_policy(cfg, build_task(cfg), log=print)
    ours, trl, generic = [], [], []
    for r in range(args.repeats):
        ours.append(bench_rollalloc(str(path), args.steps, args.threads))
        print(f"repeat {r} rollalloc:", json.dumps(ours[-1]), flush=True)
        trl.append(bench_trl(str(path), args.steps, args.threads))
        print(f"repeat {r} trl:", json.dumps(trl[-1]), flush=True)
        if args.generic:
            generic.append(bench_rollalloc(str(path), args.steps, args.threads, fast=False))
            print(f"repeat {r} rollalloc generic:", json.dumps(generic[-1]), flush=True)
    ratios = [a["completions_per_s"] / b["completions_per_s"] for a, b in zip(ours, trl)]
    # the same from the median step times: robust to a few steps stalled by the shared machine
    step_ratios = [b["median_step_s"] / a["median_step_s"] for a, b in zip(ours, trl)]
    res = {
        "threads": args.threads,
        "steps_timed": args.steps,
        "repeats": args.repeats,
        "rollalloc": ours,
        "trl": trl,
        "rollalloc_completions_per_s_median": statistics.median(
            a["completions_per_s"] for a in ours
        ),
        "trl_completions_per_s_median": statistics.median(b["completions_per_s"] for b in trl),
        "speed_ratio_rollalloc_over_trl_per_repeat": ratios,
        "speed_ratio_rollalloc_over_trl_median": statistics.median(ratios),
        "step_time_ratio_trl_over_rollalloc_per_repeat": step_ratios,
        "step_time_ratio_trl_over_rollalloc_median": statistics.median(step_ratios),
    }
    if generic:
        g_ratios = [g["completions_per_s"] / b["completions_per_s"] for g, b in zip(generic, trl)]
        f_ratios = [a["completions_per_s"] / g["completions_per_s"] for a, g in zip(ours, generic)]
        g_steps = [b["median_step_s"] / g["median_step_s"] for g, b in zip(generic, trl)]
        f_steps = [g["median_step_s"] / a["median_step_s"] for a, g in zip(ours, generic)]
        res.update(
            rollalloc_generic=generic,
            speed_ratio_generic_over_trl_per_repeat=g_ratios,
            speed_ratio_generic_over_trl_median=statistics.median(g_ratios),
            speed_ratio_fast_over_generic_per_repeat=f_ratios,
            speed_ratio_fast_over_generic_median=statistics.median(f_ratios),
            step_time_ratio_trl_over_generic_per_repeat=g_steps,
            step_time_ratio_trl_over_generic_median=statistics.median(g_steps),
            step_time_ratio_generic_over_fast_per_repeat=f_steps,
            step_time_ratio_generic_over_fast_median=statistics.median(f_steps),
        )
    print(json.dumps(res, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
