"""Test-wide settings: in CI (CI=true) hypothesis replays the same examples every run, so a CI
result never depends on which random examples it happened to draw; locally it explores."""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
