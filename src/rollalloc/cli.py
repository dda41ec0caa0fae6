"""`rollalloc` command line: simulate | train | compare | report | bench | demo | columns.

Each subcommand lives beside the code it drives and registers itself here through a
`register(subparsers)` function; heavy imports (torch, matplotlib) happen inside the command, so
`rollalloc --help` and the core stay numpy-only.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# Modules that expose `register(subparsers)`; a missing optional one is skipped.
COMMAND_MODULES = (
    "rollalloc.sim.cli",  # simulate, report
    "rollalloc.train.cli",  # train, compare, demo, columns
    "rollalloc.bench",  # bench
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rollalloc",
        description="Rollout allocation for group-based RL post-training.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod_name in COMMAND_MODULES:
        try:
            mod = importlib.import_module(mod_name)
        except ModuleNotFoundError as e:
            if e.name and mod_name.startswith(e.name):
                continue
            raise
        mod.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from rollalloc.allocator import MaxRoundsError, PoolExhaustedError

    # rollalloc's own run-stopping errors (numpy-only imports); RewardFunctionError comes from
    # rollalloc.tasks, imported only by commands that use tasks
    expected: tuple[type[BaseException], ...] = (
        ValueError,
        FileNotFoundError,
        IsADirectoryError,
        NotADirectoryError,
        PermissionError,
        PoolExhaustedError,
        MaxRoundsError,
    )
    try:
        from rollalloc.tasks import RewardFunctionError

        expected += (RewardFunctionError,)
    except ImportError:  # pragma: no cover
        pass
    try:
        return int(args.func(args) or 0)
    except expected as e:
        print(f"rollalloc {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
