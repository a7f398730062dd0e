"""Wrong dtype: shard_average_shard_map returns bfloat16 instead of float32.

Broken part: shard_average_shard_map. Every other function is the reference solution.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def shard_average_shard_map(A, *, mesh):
    def local(block):
        # Broken: halves the bytes, but the contract says f32.
        return block.mean(axis=0, keepdims=True).astype(jnp.bfloat16)

    return jax.shard_map(local, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)
