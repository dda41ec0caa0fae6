"""`reasoning-gym:NAME`: any reasoning-gym dataset, scored by its own `score_answer`, made binary.

Config: `num_train`, `num_eval` (pool and eval-set sizes), `max_completion_chars` (longer completions
score 0 unparsed); every other key goes to `reasoning_gym.create_dataset(NAME, ...)`. The eval set is
a second dataset with another seed, with any prompt of the pool removed from it.

`score_answer` gives partial credit for near misses in some datasets (chain_sum scores `-40` against
`-4` as 0.67); the reward here is 1 only for a full score, so groups are binary as GRPO assumes.
"""

from __future__ import annotations

from typing import Any

from rollalloc.tasks import Task

OWN_KEYS = ("num_train", "num_eval", "max_completion_chars")


def make_reasoning_gym_task(name: str, config: dict[str, Any], *, seed: int = 0) -> Task:
    try:
        import reasoning_gym
    except ImportError as e:  # pragma: no cover - optional extra
        raise ValueError("reasoning-gym tasks need `pip install reasoning-gym`") from e
    num_train = int(config.get("num_train", 4096))
    num_eval = int(config.get("num_eval", 512))
    max_chars = int(config.get("max_completion_chars", 1024))
    ds_config = {k: v for k, v in config.items() if k not in OWN_KEYS}
    try:
        train_ds = reasoning_gym.create_dataset(name, seed=seed, size=num_train, **ds_config)
        eval_ds = reasoning_gym.create_dataset(
            name, seed=seed + 1_000_003, size=num_eval, **ds_config
        )
    except (KeyError, TypeError) as e:
        raise ValueError(f"reasoning-gym:{name}: {e}") from e
    datasets = {"train": train_ds, "eval": eval_ds}

    def columns(split: str, exclude: set[str]) -> dict[str, list[Any]]:
        cols: dict[str, list[Any]] = {"prompt": [], "answer": [], "rg_split": [], "rg_index": []}
        for i in range(len(datasets[split])):
            entry = datasets[split][i]
            if entry["question"] in exclude:
                continue
            cols["prompt"].append(entry["question"])
            cols["answer"].append(str(entry["answer"]))
            cols["rg_split"].append(split)
            cols["rg_index"].append(i)
        return cols

    train = columns("train", set())
    evals = columns("eval", set(train["prompt"]))

    def reasoning_gym_reward(
        completions: list[str], *, rg_split: list[str], rg_index: list[int], **_: Any
    ) -> list[float]:
        out = []
        for text, split, idx in zip(completions, rg_split, rg_index):
            if not isinstance(text, str) or len(text) > max_chars:
                out.append(0.0)
                continue
            ds = datasets[split]
            try:
                score = float(ds.score_answer(text.strip(), ds[idx]))
            except Exception:  # a verifier crash on hostile text is a wrong answer
                score = 0.0
            out.append(1.0 if score >= 1.0 - 1e-9 else 0.0)
        return out

    return Task(f"reasoning-gym:{name}", train, evals, [reasoning_gym_reward], config=dict(config))
