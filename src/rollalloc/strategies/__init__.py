"""Built-in strategies, one file each; importing this package registers them."""

from rollalloc.strategies import cero, dynamic_sampling, pilot_commit, uniform  # noqa: F401
