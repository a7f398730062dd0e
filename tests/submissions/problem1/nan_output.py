"""NaNs in the output: block_average_shard_map masks negative values with NaN and then takes a
plain mean, so blocks holding a negative value average to NaN.

Broken part: block_average_shard_map. Every other function is the reference solution.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def block_average_shard_map(A, *, mesh):
    def local(block):
        # Broken: NaN poisons the mean (this wanted jnp.nanmean, and no mask at all).
        masked = jnp.where(block < 0, jnp.nan, block)
        return masked.mean(keepdims=True)

    return jax.shard_map(local, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)
