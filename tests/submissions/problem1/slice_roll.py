"""Fails on large shifts: roll_diff rolls by slicing, concatenate([a[-shift:], a[:-shift]]),
which equals a roll only while |shift| is smaller than the rows per shard.

Broken part: roll_diff (values, on the cases with |shift| >= rows per shard).
Every other function is the reference solution.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def roll_diff(A, *, mesh, shift):
    def local(block):
        # Broken: no `shift % rows`, so a shift past the block's length slices wrongly.
        rolled = jnp.concatenate([block[-shift:], block[:-shift]], axis=0)
        return rolled - block

    return jax.shard_map(local, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)
