"""Local JSONL / JSON / Parquet files with `prompt` and `answer` columns, scored by math-verify.

Config: `eval_path` (a second file for the held-out set; without it `eval_fraction` of the rows,
chosen by the seed, are held out), `max_rows`, and the verifier's `timeout_s`, `workers`,
`max_completion_chars`.

math-verify parses LaTeX and sympy expressions, which can take unbounded time on hostile text, so
it runs in a pool of worker processes: each verification has a wall-clock timeout, a timed-out or
crashed one scores 0, and a pool with a stuck worker is terminated and replaced.
"""

from __future__ import annotations

import json
import multiprocessing as mp
from pathlib import Path
from typing import Any

import numpy as np

from rollalloc.tasks import Task

MAX_FILE_MB = 1024
"""Largest task file read (config `max_file_mb`): bigger ones are refused before reading."""
MAX_PROMPT_CHARS = 8192
"""Longest prompt accepted (config `max_prompt_chars`), checked when the file is loaded."""
KNOWN_OPTIONS = (
    "eval_path",
    "eval_fraction",
    "max_rows",
    "timeout_s",
    "workers",
    "max_completion_chars",
    "max_prompt_chars",
    "max_file_mb",
)


def read_rows(path: str | Path, max_file_mb: float = MAX_FILE_MB) -> dict[str, list[Any]]:
    """Columns of a .jsonl / .json (list of objects) / .parquet file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"task file {path} not found")
    size_mb = path.stat().st_size / 2**20
    if size_mb > max_file_mb:
        raise ValueError(
            f"{path}: {size_mb:,.1f} MB exceeds max_file_mb={max_file_mb:g} "
            "(raise it with --task-config '{\"max_file_mb\": ...}')"
        )
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pydict()
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        line = path.read_bytes()[: e.start].count(b"\n") + 1
        raise ValueError(f"{path}: line {line} is not UTF-8 text ({e.reason})") from None
    if path.suffix == ".jsonl":
        rows = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}: line {n} is not JSON ({e.msg})") from None
    else:
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not JSON ({e.msg} at line {e.lineno})") from None
        if not isinstance(rows, list):
            raise ValueError(f"{path}: a .json task file must hold a list of objects")
    if not rows:
        raise ValueError(f"{path}: no rows")
    keys = list(rows[0])
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or set(row) != set(keys):
            raise ValueError(f"{path}: row {i} does not have the columns {keys}")
    return {k: [row[k] for row in rows] for k in keys}


def _warm_worker() -> None:
    import math_verify  # noqa: F401


def _ping(x: int) -> int:
    return x


def _verify_one(gold: str, pred: str, timeout: int = 5) -> float:
    # runs in a worker process's main thread, where math-verify's own (signal) timeouts work;
    # the pool's wall-clock timeout is the second line of defence
    from math_verify import parse, verify

    gold_parsed = parse(gold, parsing_timeout=timeout)
    pred_parsed = parse(pred, parsing_timeout=timeout)
    if not gold_parsed or not pred_parsed:
        return 0.0
    return 1.0 if verify(gold_parsed, pred_parsed, timeout_seconds=timeout) else 0.0


class MathVerifyReward:
    """TRL-style reward `f(completions, answer=...) -> list[float]` backed by a worker pool."""

    def __init__(
        self,
        timeout_s: float = 5.0,
        workers: int = 1,
        max_completion_chars: int = 4096,
        verify_fn=_verify_one,
    ):
        self.verify_fn = verify_fn  # a module-level function (it is sent to worker processes)
        self.timeout_s = timeout_s
        self.workers = workers
        self.max_completion_chars = max_completion_chars
        self._pool = None
        self.__name__ = "math_verify_reward"

    def _get_pool(self):
        if self._pool is None:
            # workers import math-verify (sympy: seconds) before the first timed verification
            self._pool = mp.get_context("spawn").Pool(self.workers, initializer=_warm_worker)
            self._pool.map(_ping, range(self.workers))
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:
            pass

    def __call__(self, completions: list[str], *, answer: list[str], **_: Any) -> list[float]:
        out = [0.0] * len(completions)
        todo = [
            (i, str(gold), text)
            for i, (text, gold) in enumerate(zip(completions, answer))
            if isinstance(text, str) and len(text) <= self.max_completion_chars
        ]
        while todo:
            pool = self._get_pool()
            jobs = [
                (i, pool.apply_async(self.verify_fn, (gold, text, max(1, int(self.timeout_s)))))
                for i, gold, text in todo
            ]
            todo_next = []
            for k, (i, job) in enumerate(jobs):
                try:
                    # jobs start in order, so the first one not done after the timeout is the
                    # one holding its worker (with workers=1, exactly so)
                    out[i] = float(job.get(timeout=self.timeout_s))
                except mp.TimeoutError:
                    out[i] = 0.0
                    self.close()  # kill the stuck worker; the rest run on a fresh pool
                    todo_next = todo[k + 1 :]
                    break
                except Exception:
                    out[i] = 0.0
            todo = todo_next
        return out


def _check_options(path: str, config: dict[str, Any]) -> tuple[float, int]:
    """Unknown options and out-of-range limits are refused; returns (max_file_mb,
    max_prompt_chars)."""
    unknown = sorted(set(config) - set(KNOWN_OPTIONS))
    if unknown:
        raise ValueError(
            f"{path}: unknown task option(s) {unknown}; known: {', '.join(KNOWN_OPTIONS)}"
        )
    frac = config.get("eval_fraction", 0.1)
    if isinstance(frac, bool) or not isinstance(frac, (int, float)) or not 0 < frac < 1:
        raise ValueError(f"{path}: eval_fraction must be in (0, 1), got {frac!r}")
    limits = []
    for name, default in (("max_file_mb", MAX_FILE_MB), ("max_prompt_chars", MAX_PROMPT_CHARS)):
        v = config.get(name, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
            raise ValueError(f"{path}: {name} must be a positive number, got {v!r}")
        limits.append(v)
    return float(limits[0]), int(limits[1])


def _check_prompt_lengths(path: str, cols: dict[str, list[Any]], max_chars: int) -> None:
    for i, prompt in enumerate(cols.get("prompt", [])):
        if isinstance(prompt, str) and len(prompt) > max_chars:
            raise ValueError(
                f"{path}: row {i} has a prompt of {len(prompt):,} characters, more than "
                f"max_prompt_chars={max_chars:,} (raise it with --task-config "
                "'{\"max_prompt_chars\": ...}')"
            )


def make_file_task(path: str, config: dict[str, Any], *, seed: int = 0) -> Task:
    max_mb, max_chars = _check_options(path, config)
    cols = read_rows(path, max_mb)
    _check_prompt_lengths(path, cols, max_chars)
    for key in ("prompt", "answer"):
        if key not in cols:
            raise ValueError(f"{path}: no {key!r} column (columns: {sorted(cols)})")
    cols["answer"] = [str(a) for a in cols["answer"]]
    max_rows = config.get("max_rows")
    if max_rows is not None:
        cols = {k: v[: int(max_rows)] for k, v in cols.items()}
    if config.get("eval_path"):
        train, evals = cols, read_rows(config["eval_path"], max_mb)
        _check_prompt_lengths(config["eval_path"], evals, max_chars)
        evals["answer"] = [str(a) for a in evals["answer"]]
    else:
        n = len(cols["prompt"])
        frac = float(config.get("eval_fraction", 0.1))
        n_eval = max(1, int(round(frac * n))) if n > 1 else 0
        perm = np.random.default_rng(seed).permutation(n)
        eval_idx, train_idx = sorted(perm[:n_eval]), sorted(perm[n_eval:])
        train = {k: [v[i] for i in train_idx] for k, v in cols.items()}
        evals = {k: [v[i] for i in eval_idx] for k, v in cols.items()}
    reward = MathVerifyReward(
        timeout_s=float(config.get("timeout_s", 5.0)),
        workers=int(config.get("workers", 1)),
        max_completion_chars=int(config.get("max_completion_chars", 4096)),
    )
    return Task(Path(path).name, train, evals, [reward], config=dict(config))
