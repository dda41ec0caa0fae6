"""Test-wide settings: in CI (CI=true) hypothesis replays the same examples every run, so a CI
result never depends on which random examples it happened to draw; locally it explores.
(The verl tests run in their own environment without hypothesis, hence the guard.)"""

import importlib.util
import os
from pathlib import Path

import pytest

try:
    from hypothesis import settings
except ImportError:  # the .venv-verl environment
    settings = None

if settings is not None:
    settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
    if os.environ.get("CI"):
        settings.load_profile("ci")


@pytest.fixture(scope="session")
def load_benchmark():
    """load_benchmark(NAME): the module of benchmarks/NAME.py (benchmarks are scripts, not a
    package)."""
    return _load_benchmark


def _load_benchmark(name: str):
    path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
