"""Ignores its input: roll_diff returns zeros of the right shape, dtype and sharding, with
no communication at all. A shift that is a whole number of the rows per shard (0, or 6 on 3
rows) has the all-zero answer whatever A holds, so zeros are right there; those cases count
only once a case whose answer depends on A is right too, and none is.

Broken part: roll_diff (every case).
Every other function is the reference solution.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def roll_diff(A, *, mesh, shift):
    def local(block):
        return jnp.zeros_like(block)  # Broken: the answer of shift 0, for every shift

    return jax.shard_map(local, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)
