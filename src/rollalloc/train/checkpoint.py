"""Atomic, checksummed checkpoints of a training run, without pickle.

    run_dir/checkpoints/step-0000040/
        model.safetensors        policy weights (safetensors)
        trainer.pt               optimizer, scheduler, mini-batch and torch RNG states
                                 (torch.save; loaded with weights_only=True)
        rollouts.safetensors     the stored rollouts live handles still refer to (the
                                 Pilot-Commit buffer): ragged arrays, concatenated
        allocator.npz            allocator.state_dict() via rollalloc.state.save_state
        state.json               loop state (step, evaluations, ...), config, log line counts
        manifest.json            format version, step, strategy, size and sha256 of every file
                                 above; written last
    run_dir/checkpoints/latest   name of the newest complete checkpoint

A checkpoint is written into a temporary directory, every file fsynced, the manifest written last,
then the directory is renamed into place; only then does `latest` (itself replaced atomically)
point at it, and all but the newest `keep` checkpoints are removed. A crash at any moment leaves
the previous checkpoints intact. On resume (`resumable_checkpoint`) a checkpoint whose manifest is
missing or whose files do not match it is skipped with a logged reason, and the newest good one is
used (docs/reliability.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

import torch

from rollalloc.state import atomic_write_bytes, load_state, save_state

FORMAT = "rollalloc.checkpoint"
FORMAT_VERSION = 1
"""Version of the checkpoint layout; a checkpoint of another version is refused by name."""
MANIFEST = "manifest.json"
FILES = (
    "model.safetensors",
    "trainer.pt",
    "rollouts.safetensors",
    "allocator.npz",
    "state.json",
)
PAUSE_ENV = "ROLLALLOC_CHECKPOINT_PAUSE_S"
"""Test hook (benchmarks/fault_injection.py): seconds to sleep after each file of a checkpoint is
written, so that a kill lands inside a checkpoint write. Unset in normal use."""

_STEP_DIR = re.compile(r"step-(\d+)")


class CheckpointError(ValueError):
    """A checkpoint is missing, damaged or of another format; the message names the file."""


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _pause() -> None:
    delay = os.environ.get(PAUSE_ENV)
    if delay:
        time.sleep(float(delay))


def save_checkpoint(
    run_dir: Path,
    step: int,
    *,
    model,
    learner,
    store,
    allocator,
    meta: dict[str, Any],
    keep: int = 2,
) -> Path:
    """Write checkpoint `step-{step}` atomically, point `latest` at it, keep the newest `keep`."""
    from safetensors.numpy import save_file as save_numpy
    from safetensors.torch import save_model

    if keep < 1:
        raise ValueError(f"keep must be >= 1, got {keep}")
    root = Path(run_dir) / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    for stale in root.glob(".step-*.tmp-*"):  # left by a process killed mid-write
        shutil.rmtree(stale, ignore_errors=True)
    name = f"step-{step:07d}"
    tmp = root / f".{name}.tmp-{os.getpid()}"
    tmp.mkdir()
    save_model(model, str(tmp / "model.safetensors"))
    _pause()
    trainer_state = {"learner": learner.state_dict(), "torch_rng": torch.get_rng_state()}
    if torch.cuda.is_available():
        trainer_state["cuda_rng"] = torch.cuda.get_rng_state_all()
    torch.save(trainer_state, tmp / "trainer.pt")
    _pause()
    save_numpy(store.state_dict(), str(tmp / "rollouts.safetensors"))
    _pause()
    save_state(tmp / "allocator.npz", allocator.state_dict())
    (tmp / "state.json").write_text(json.dumps(meta))
    _pause()
    for f in FILES:
        _fsync_file(tmp / f)
    manifest = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "step": int(step),
        "strategy": getattr(allocator, "name", None),
        "files": {
            f: {"bytes": (tmp / f).stat().st_size, "sha256": _sha256(tmp / f)} for f in FILES
        },
    }
    atomic_write_bytes(tmp / MANIFEST, json.dumps(manifest, indent=1).encode())
    _fsync_dir(tmp)
    final = root / name
    shutil.rmtree(final, ignore_errors=True)
    os.rename(tmp, final)
    _fsync_dir(root)
    _pause()
    atomic_write_bytes(root / "latest", name.encode())
    # keep the newest `keep` up to this step; any newer ones are from a history that a resume
    # from an older checkpoint has since replaced
    older = [p for s, p in list_checkpoints(run_dir) if s <= step]
    for s, p in list_checkpoints(run_dir):
        if s > step or p not in older[-keep:]:
            shutil.rmtree(p, ignore_errors=True)
    return final


def list_checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """(step, path) of every checkpoint directory of a run, oldest first (not verified)."""
    root = Path(run_dir) / "checkpoints"
    if not root.is_dir():
        return []
    out = []
    for p in root.iterdir():
        m = _STEP_DIR.fullmatch(p.name)
        if m and p.is_dir():
            out.append((int(m.group(1)), p))
    return sorted(out)


def verify_checkpoint(path: Path) -> dict[str, Any]:
    """The manifest of checkpoint `path` after checking every file against it.

    Raises CheckpointError naming the file that is missing, truncated or altered, or the manifest
    itself when it is absent, unreadable or of another format version."""
    path = Path(path)
    mpath = path / MANIFEST
    if not path.is_dir():
        raise CheckpointError(f"checkpoint {path} does not exist")
    if not mpath.is_file():
        raise CheckpointError(f"{mpath}: manifest missing (incomplete or damaged checkpoint)")
    try:
        manifest = json.loads(mpath.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{mpath}: unreadable manifest ({e})") from e
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise CheckpointError(f"{mpath}: not a rollalloc checkpoint manifest")
    if manifest.get("version") != FORMAT_VERSION:
        raise CheckpointError(
            f"{mpath}: checkpoint format version {manifest.get('version')!r} is not supported "
            f"(this rollalloc reads version {FORMAT_VERSION})"
        )
    files = manifest.get("files")
    if not isinstance(files, dict) or set(files) != set(FILES):
        raise CheckpointError(f"{mpath}: manifest does not list the files {list(FILES)}")
    for name, want in files.items():
        f = path / name
        if not f.is_file():
            raise CheckpointError(f"{f}: missing from the checkpoint")
        size = f.stat().st_size
        if size != want.get("bytes"):
            raise CheckpointError(
                f"{f}: {size} bytes, the manifest says {want.get('bytes')} (truncated or altered)"
            )
        if _sha256(f) != want.get("sha256"):
            raise CheckpointError(f"{f}: sha256 does not match the manifest (corrupted)")
    return manifest


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The checkpoint `latest` names, if it exists (not verified; see `resumable_checkpoint`)."""
    pointer = Path(run_dir) / "checkpoints" / "latest"
    if not pointer.is_file():
        return None
    try:
        name = pointer.read_bytes().decode("utf-8").strip()
    except UnicodeDecodeError:
        return None
    if not _STEP_DIR.fullmatch(name):
        return None
    path = pointer.parent / name
    return path if path.is_dir() else None


def resumable_checkpoint(run_dir: Path, log=print) -> Path | None:
    """The checkpoint a resume should load: the one `latest` names if it verifies, else the
    newest one that verifies, logging each one skipped and why. None if the run has none."""
    log = log or (lambda *_: None)
    pointer = Path(run_dir) / "checkpoints" / "latest"
    named = latest_checkpoint(run_dir)
    if pointer.exists() and named is None:
        text = pointer.read_bytes()[:80]
        log(f"resume: {pointer} does not name a checkpoint ({text!r}); looking for the newest one")
    candidates = [p for _, p in reversed(list_checkpoints(run_dir))]
    if named is not None:
        candidates = [named] + [p for p in candidates if p != named]
    skipped = []
    for path in candidates:
        try:
            verify_checkpoint(path)
        except CheckpointError as e:
            log(f"resume: skipping checkpoint {path.name}: {e}")
            skipped.append(path.name)
            continue
        if skipped:
            log(f"resume: falling back to {path.name} (skipped {', '.join(skipped)})")
        return path
    if skipped:
        raise CheckpointError(
            f"resume: no readable checkpoint in {Path(run_dir) / 'checkpoints'} "
            f"(all damaged: {', '.join(skipped)})"
        )
    return None


def read_checkpoint_meta(path: Path) -> dict[str, Any]:
    """state.json of a verified checkpoint (loop state, config, log line counts)."""
    verify_checkpoint(path)
    f = Path(path) / "state.json"
    try:
        return json.loads(f.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:  # pragma: no cover - checksummed
        raise CheckpointError(f"{f}: unreadable ({e})") from e


def load_checkpoint(path: Path, *, model, learner, store, allocator) -> dict[str, Any]:
    """Restore everything saved by `save_checkpoint` in place; returns its state.json.

    The checkpoint is verified against its manifest first; a damaged or foreign checkpoint raises
    CheckpointError naming the file and leaves model, learner, store and allocator untouched."""
    from safetensors.numpy import load_file as load_numpy
    from safetensors.torch import load_model

    path = Path(path)
    manifest = verify_checkpoint(path)
    name = getattr(allocator, "name", None)
    if manifest.get("strategy") != name:
        raise CheckpointError(
            f"{path / MANIFEST}: checkpoint of strategy {manifest.get('strategy')!r}, "
            f"this run uses {name!r}"
        )
    meta = read_checkpoint_meta(path)
    try:
        allocator_state = load_state(path / "allocator.npz")
        rollouts = load_numpy(str(path / "rollouts.safetensors"))
        trainer_state = torch.load(path / "trainer.pt", weights_only=True)
    except Exception as e:  # checksums matched, so the writer and reader disagree on a format
        raise CheckpointError(f"{path}: cannot read checkpoint files ({e})") from e
    # the allocator validates its state against its own strategy/pool/options: do it first so
    # a mismatch raises before anything was changed
    allocator.load_state_dict(allocator_state)
    load_model(model, str(path / "model.safetensors"))
    learner.load_state_dict(trainer_state["learner"])
    torch.set_rng_state(trainer_state["torch_rng"])
    if "cuda_rng" in trainer_state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(trainer_state["cuda_rng"])
    store.load_state_dict(rollouts)
    return meta
