"""A style violation: shard_average_jit must use jax.jit only, but is written with shard_map.
The values are right, so it keeps the values half of its points.

Broken part: shard_average_jit (style only). Every other function is the reference solution.
"""

import jax
from jax.sharding import NamedSharding, PartitionSpec as P


def shard_average_jit(A, *, mesh):
    # Broken: the right values, but this exercise is about what jax.jit does on its own.
    def local(block):
        return block.mean(axis=0, keepdims=True)

    return jax.shard_map(local, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)
