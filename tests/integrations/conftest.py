"""The verl integration suite (test_verl_env.py) starts in the background as soon as collection has
selected it: building .venv-verl and running tests/integrations/verl take ~6 minutes on one core,
and the main suite runs on one core, so on a two-core machine the two overlap instead of adding
up. The test runs last and waits for the result. A session that ends first (`-x`) kills the
background work; a build killed that way is redone by the next run. Only the standard library
here: this conftest is also loaded by the verl environment's own pytest run."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import threading
import traceback
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("ROLLALLOC_VERL_VENV", ROOT / ".venv-verl"))
SUITE_TEST = "test_verl_env.py::test_verl_integration_suite"
BUILD_TIMEOUT_S, RUN_TIMEOUT_S = 1800, 1200
PYTEST_ARGS = [
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
]


class VerlSuite:
    """scripts/verl-env.sh, then the verl tests in that environment, in a thread of their own (the
    work is in child processes at lower priority, `nice`; the thread only waits). `wait()` gives
    each step's (exit code, output): "build", and "run" unless the build failed; -9 is a step
    killed at its timeout; "error" holds the traceback if the thread itself failed."""

    def __init__(self) -> None:
        self.results: dict[str, tuple[int, str]] = {}
        self._env = dict(os.environ)  # as at the start, whatever a test patches later
        self._proc: subprocess.Popen | None = None
        self._stopped = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._work, name="verl-suite", daemon=True)
        self._thread.start()

    def _step(self, name: str, cmd: list[str], timeout: float) -> int:
        with tempfile.TemporaryFile(mode="w+", errors="replace") as out:
            with self._lock:
                if self._stopped:
                    self.results[name] = (-1, "stopped before it started")
                    return -1
                self._proc = subprocess.Popen(  # a process group of its own: stop() ends all of it
                    ["nice", "-n", "10", *cmd],
                    cwd=ROOT,
                    env=self._env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    text=True,
                    start_new_session=True,
                )
            try:
                code = self._proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._kill()
                self._proc.wait()
                code = -9
                out.write(f"\n{name} timed out after {timeout} s\n")
            out.seek(0)
            self.results[name] = (code, out.read())
            return code

    def _work(self) -> None:
        try:
            build = ["bash", str(ROOT / "scripts" / "verl-env.sh"), str(VENV)]
            if self._step("build", build, BUILD_TIMEOUT_S) == 0:
                self._step("run", [str(VENV / "bin" / "python"), *PYTEST_ARGS], RUN_TIMEOUT_S)
        except Exception:  # reported by the test, not lost in a thread
            self.results["error"] = (-1, traceback.format_exc())

    def wait(self) -> dict[str, tuple[int, str]]:
        self._thread.join()
        return self.results

    def stop(self) -> None:
        """Kill the step in progress and start no other (the session ended without the test)."""
        with self._lock:
            self._stopped = True
            self._kill()
        self._thread.join(timeout=30)

    def _kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except ProcessLookupError:  # ended meanwhile
                pass


_SUITE = pytest.StashKey[VerlSuite]()


def pytest_collection_modifyitems(config, items):
    """The suite's test goes last, so that it waits for the background work as late as it can."""
    last = [i for i in items if i.nodeid.endswith(SUITE_TEST)]
    if last:
        items[:] = [i for i in items if not i.nodeid.endswith(SUITE_TEST)] + last


def pytest_collection_finish(session):
    config = session.config  # after -k / -m deselection: session.items are the tests that run
    if config.option.collectonly or config.stash.get(_SUITE, None) is not None:
        return
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: the test starts it when it runs
        return
    if any(item.nodeid.endswith(SUITE_TEST) for item in session.items):
        config.stash[_SUITE] = VerlSuite()


def pytest_unconfigure(config):
    suite = config.stash.get(_SUITE, None)
    if suite is not None:
        suite.stop()


@pytest.fixture
def verl_suite(request) -> VerlSuite:
    """The suite started at collection (or now, if this test was not selected by collection)."""
    suite = request.config.stash.get(_SUITE, None)
    if suite is None:
        suite = request.config.stash[_SUITE] = VerlSuite()
    return suite
