"""Runs the verl integration's tests in their own environment (.venv-verl: verl 0.9.1 pins its own
transformers). Builds it with scripts/verl-env.sh if needed (idempotent; ~1-2 min when PyPI is
reachable); skips, saying why, only where that environment cannot be built."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("ROLLALLOC_VERL_VENV", ROOT / ".venv-verl"))


def test_verl_integration_suite():
    build = subprocess.run(
        ["bash", str(ROOT / "scripts" / "verl-env.sh"), str(VENV)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if build.returncode != 0:
        tail = "\n".join((build.stdout + build.stderr).splitlines()[-15:])
        pytest.skip(
            f"the verl test environment {VENV} could not be built (scripts/verl-env.sh exit {build.returncode}):\n{tail}"
        )
    run = subprocess.run(
        [
            str(VENV / "bin" / "python"),
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-W",
            "ignore::UserWarning",
            "-W",
            "ignore::FutureWarning",
            "tests/integrations/verl",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    out = run.stdout + run.stderr
    sys.stdout.write(out[-3000:])
    assert run.returncode == 0, f"tests/integrations/verl failed in {VENV}:\n{out[-6000:]}"
    assert " passed" in out and "no tests ran" not in out, out[-2000:]
