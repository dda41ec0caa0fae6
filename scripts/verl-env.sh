#!/usr/bin/env bash
# Build .venv-verl: the separate environment in which rollalloc's verl integration is tested.
#
# verl pins its own transformers (>=5.5.3,<5.11), which differs from rollalloc's own trainer env,
# so its tests run in their own venv (tests/integrations/test_verl_env.py calls this script, then
# `.venv-verl/bin/python -m pytest tests/integrations/verl`).
#
# torch is pinned to 2.13.0 first: that is the CPU build on this machine's disk. verl 0.9.1's base
# requirements name no torch version (only its [vllm]/[sglang]/[fsdp]/[cpu] extras pin torch 2.11 and
# CUDA kernels), so with 2.13.0 installed nothing CUDA is pulled. We install verl's base requirements
# only: no vllm, sglang, flash-attn or megatron (GPU users install those; see docs/verl.md).
#
# rollalloc is installed editable, so its entry points in group "verl.plugins" (the CPU platform
# and the hf_cpu rollout backend) load in every process that imports verl; the check below says so.
#
# Usage: scripts/verl-env.sh [VENV_DIR]    (idempotent: a stamp file skips a finished build)
# Env:   PY (python >= 3.10, < 3.13), TORCH (default torch==2.13.0), VERL (default verl==0.9.1)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-$ROOT/.venv-verl}"
PY="${PY:-python3}"
TORCH="${TORCH:-torch==2.13.0}"
VERL="${VERL:-verl==0.9.1}"
# Pins for what verl's own requirements leave open and that we have tested together.
EXTRA_PINS=(
  "transformers>=5.5.3,<5.11,!=5.6.0"
  "tensordict>=0.8.0,<=0.10.0,!=0.9.0"
  "numpy>=2.0"
  "pytest>=8"
  # imported by verl's trainer/worker modules but listed only in its [verl-core] extra
  "cachetools"
  "fastapi"
  "uvicorn"
)
# Stamp content: everything that decides what is installed. A change rebuilds.
WANT="$(printf '%s\n' "$TORCH" "$VERL" "${EXTRA_PINS[@]}" "$(sha256sum "$ROOT/pyproject.toml" | cut -c1-16)" "v3")"
STAMP="$VENV/.rollalloc-verl-env"

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" && -x "$VENV/bin/python" ]]; then
  echo "verl-env: $VENV is up to date"
  exit 0
fi

if ! "$PY" -c 'import sys; sys.exit(0 if (3, 10) <= sys.version_info[:2] < (3, 13) else 1)'; then
  echo "verl-env: $PY is $("$PY" --version 2>&1); verl 0.9.1 needs Python >=3.10,<3.13" >&2
  exit 2
fi

# pip on this kind of machine warns about every missing local index folder: keep its real errors only.
pip_quiet() { "$@" 2> >(grep -v -e "^WARNING: Location 'file://" -e "BuildBackendWarning" >&2); }

t0=$(date +%s)
rm -rf "$VENV"
"$PY" -m venv "$VENV"
PIP=(pip_quiet "$VENV/bin/python" -m pip install -q --disable-pip-version-check)
"${PIP[@]}" --upgrade pip
# 1. torch first, so nothing below can pick a (multi-GB) CUDA build.
"${PIP[@]}" "$TORCH"
TORCH_VERSION="$("$VENV/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])')"
# 2. verl and its base requirements, with torch held at the version just installed.
CONSTRAINTS="$(mktemp)"
trap 'rm -f "$CONSTRAINTS"' EXIT
echo "torch==$TORCH_VERSION" >"$CONSTRAINTS"
"${PIP[@]}" -c "$CONSTRAINTS" "$VERL" "${EXTRA_PINS[@]}"
# 3. rollalloc itself (numpy-only core), editable, without its own [train] extras.
"${PIP[@]}" -c "$CONSTRAINTS" --no-deps -e "$ROOT"
# 4. Check: the pieces the integration and its tests use import.
"$VENV/bin/python" - <<'PY'
import torch, verl, ray, tensordict, transformers, hydra  # noqa: F401
from verl import DataProto  # noqa: F401
from verl.trainer.ppo import core_algos  # noqa: F401
import rollalloc.integrations.verl.trainer  # noqa: F401  (verl's RayPPOTrainer and worker stack)
# rollalloc's verl plugins (pyproject entry points "verl.plugins"), loaded by `import verl`
from verl.plugin.platform import PlatformRegistry
from verl.workers.rollout.replica import RolloutReplicaRegistry
assert PlatformRegistry.get("cpu") is not None, "verl.plugins entry point: cpu platform not registered"
assert RolloutReplicaRegistry.get("hf_cpu") is not None
print(f"verl-env: verl {verl.__version__}, torch {torch.__version__}, transformers {transformers.__version__}, "
      f"ray {ray.__version__}, tensordict {tensordict.__version__}")
PY
printf '%s' "$WANT" >"$STAMP"
echo "verl-env: built $VENV in $(( $(date +%s) - t0 ))s"
