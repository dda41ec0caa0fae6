"""Built-in strategies, one file each; importing this package registers them."""

from rollalloc.strategies import (  # noqa: F401
    cero,
    dynamic_sampling,
    greso,
    knapsack,
    likelihood_rank,
    mopps,
    pilot_commit,
    posterior_signal,
    speed_rl,
    uniform,
)
