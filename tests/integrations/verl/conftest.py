"""These tests need verl and run in their own environment (.venv-verl, scripts/verl-env.sh):
tests/integrations/test_verl_env.py runs them from the main suite. Without verl they are not collected."""

import importlib.util
import os
import sys

if importlib.util.find_spec("verl") is None:
    collect_ignore_glob = ["test_*.py"]

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for verl_fakes
