"""Test-wide settings: in CI (CI=true) hypothesis replays the same examples every run, so a CI
result never depends on which random examples it happened to draw; locally it explores.
(The verl tests run in their own environment without hypothesis, hence the guard.)"""

import os

try:
    from hypothesis import settings
except ImportError:  # the .venv-verl environment
    settings = None

if settings is not None:
    settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
    if os.environ.get("CI"):
        settings.load_profile("ci")
