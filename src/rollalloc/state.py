"""Per-prompt state in columns, and the on-disk format of every state dict.

`PromptTable` holds one entry per prompt of the pool in numpy columns, so that a step touches only
the rows of its batch (O(batch)) and a million-prompt pool costs a few tens of MB.

A *state dict* is a nested dict of JSON values and numpy arrays. `save_state` writes it as one `.npz`
file (arrays, `allow_pickle=False`) whose entry `__json__` holds the JSON skeleton; it is written to a
temporary name, fsynced and renamed, so a crash leaves either the old file or the new one. Never
pickle: a checkpoint may come from anywhere.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

ACTIVE, DEFERRED, EVICTED = 0, 1, 2
RENAMED_COLUMNS = {"reward_sum": "success_sum", "last_mean": "last_success_rate"}
STATUS_NAMES = {ACTIVE: "active", DEFERRED: "deferred", EVICTED: "evicted"}


class PromptTable:
    """Columnar per-prompt state: `table.col[i]` is prompt i's value of column `col`.

    Base columns (bytes per prompt in brackets):
      status [1]      ACTIVE / DEFERRED (back next epoch) / EVICTED (never asked again)
      trials [4]      rollouts generated for this prompt so far
      success_sum [4]        sum of their successes (Outcome.success, or the reward in [0, 1])
      last_step [4]          step of the last rollouts it got, -1 if never
      last_success_rate [4]  success rate of its last group (NaN if never)
    Strategies add their own columns with `add_column` (Beta parameters, dual values, ...).
    """

    BASE = {
        "status": (np.int8, ACTIVE),
        "trials": (np.int32, 0),
        "success_sum": (np.float32, 0.0),
        "last_step": (np.int32, -1),
        "last_success_rate": (np.float32, np.nan),
    }

    def __init__(self, num_prompts: int):
        if int(num_prompts) < 1:
            raise ValueError(f"num_prompts must be >= 1, got {num_prompts}")
        self.num_prompts = int(num_prompts)
        self.columns: dict[str, np.ndarray] = {}
        for name, (dtype, fill) in self.BASE.items():
            self.add_column(name, dtype, fill)

    def add_column(self, name: str, dtype: Any, fill: Any) -> np.ndarray:
        if name in self.columns:
            raise ValueError(f"PromptTable: column {name!r} exists already")
        self.columns[name] = np.full(self.num_prompts, fill, dtype=dtype)
        return self.columns[name]

    def __getattr__(self, name: str) -> np.ndarray:
        cols = self.__dict__.get("columns")
        if cols is not None and name in cols:
            return cols[name]
        raise AttributeError(name)

    def counts(self) -> dict[str, int]:
        """Prompts by status (O(pool): for epoch boundaries and reports)."""
        c = np.bincount(self.columns["status"], minlength=3)
        return {STATUS_NAMES[s]: int(c[s]) for s in STATUS_NAMES}

    @property
    def nbytes(self) -> int:
        return int(sum(c.nbytes for c in self.columns.values()))

    def state_dict(self) -> dict[str, Any]:
        return {"num_prompts": self.num_prompts, "columns": dict(self.columns)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if int(state["num_prompts"]) != self.num_prompts:
            raise ValueError(
                f"PromptTable: state has {state['num_prompts']} prompts, this pool has "
                f"{self.num_prompts}"
            )
        columns = dict(state["columns"])
        for old, new in RENAMED_COLUMNS.items():  # states written before the success signal
            if old in columns and new not in columns:
                columns[new] = columns.pop(old)
        missing = set(self.columns) - set(columns)
        if missing:
            raise ValueError(f"PromptTable: state lacks columns {sorted(missing)}")
        for name, col in self.columns.items():
            src = np.asarray(columns[name])
            if src.shape != col.shape:
                raise ValueError(f"PromptTable: column {name!r} has shape {src.shape}")
            self.columns[name] = src.astype(col.dtype, copy=True)


# ---------------------------------------------------------------------------- state files


def _split(obj: Any, arrays: dict[str, np.ndarray], path: str) -> Any:
    """Replace every numpy array in `obj` by a reference into `arrays`."""
    if isinstance(obj, np.ndarray):
        if obj.dtype == object:
            raise TypeError(f"state: object array at {path!r} cannot be saved without pickle")
        key = f"a{len(arrays)}"
        arrays[key] = obj
        return {"__array__": key}
    if isinstance(obj, dict):
        for k in obj:
            if not isinstance(k, str):
                raise TypeError(f"state: non-string key {k!r} at {path!r}")
        return {k: _split(v, arrays, f"{path}/{k}") for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_split(v, arrays, f"{path}/{i}") for i, v in enumerate(obj)]
    if isinstance(obj, np.generic):
        return obj.item()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"state: cannot save {type(obj).__name__} at {path!r}")


def _join(obj: Any, arrays: Any) -> Any:
    if isinstance(obj, dict):
        if set(obj) == {"__array__"}:
            return np.array(arrays[obj["__array__"]])
        return {k: _join(v, arrays) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_join(v, arrays) for v in obj]
    return obj


def state_to_bytes(state: dict[str, Any]) -> bytes:
    arrays: dict[str, np.ndarray] = {}
    skeleton = _split(state, arrays, "")
    buf = io.BytesIO()
    meta = np.frombuffer(json.dumps(skeleton).encode("utf-8"), dtype=np.uint8)
    np.savez(buf, __json__=meta, **arrays)
    return buf.getvalue()


def state_from_bytes(data: bytes, name: str = "<bytes>") -> dict[str, Any]:
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            skeleton = json.loads(bytes(npz["__json__"]).decode("utf-8"))
            arrays = {k: npz[k] for k in npz.files if k != "__json__"}
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as e:
        raise ValueError(f"{name}: not a readable rollalloc state file ({e})") from e
    return _join(skeleton, arrays)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` to `path` so that a crash leaves the old file or the new one, never half."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"cannot write {path}: it is a directory (give a file name)")
    if path.parent.exists() and not path.parent.is_dir():
        raise ValueError(f"cannot write {path}: {path.parent} is a file, not a directory")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a failed write leaves no temporary file behind
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def save_state(path: str | os.PathLike, state: dict[str, Any]) -> None:
    """Save a state dict (JSON values + numpy arrays) atomically as an .npz file."""
    atomic_write_bytes(path, state_to_bytes(state))


def load_state(path: str | os.PathLike) -> dict[str, Any]:
    """Load a state dict written by `save_state`; a damaged file raises ValueError naming it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"state file {path} does not exist")
    return state_from_bytes(path.read_bytes(), name=str(path))
