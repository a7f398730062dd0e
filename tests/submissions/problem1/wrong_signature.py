"""Wrong signature: roll_diff has no `shift` keyword (it hard-codes a shift of 1).

Broken part: roll_diff. Every other function is the reference solution.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def roll_diff(A, *, mesh):
    def local(block):
        return jnp.roll(block, 1, axis=0) - block

    return jax.shard_map(local, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)
