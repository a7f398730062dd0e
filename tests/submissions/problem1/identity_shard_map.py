"""A style violation hidden by a decoy: shard_average_shard_map calls a shard_map that passes
its input through, and jax.jit computes the averages around it (the right values, and no
communication, but the work the part asks to write inside a shard_map is jax.jit's). It
keeps the values half of its points.

Broken part: shard_average_shard_map (style only). Every other function is the reference solution.
"""

import jax
from jax.sharding import NamedSharding, PartitionSpec as P


def shard_average_shard_map(A, *, mesh):
    # Broken: a shard_map that passes its input through, then jax.jit averages around it.
    A = jax.shard_map(lambda a: a, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)
    return shard_average_jit(A, mesh=mesh)
