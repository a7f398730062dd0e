"""A right answer: shard_average_shard_map written with a shard_map that is manual over X only
(axis_names={'X'}, Y left to the partitioner). On a 1xN mesh JAX inlines that shard_map (its
one manual axis has one device), so the compiled program shows none there: the style must be
judged only where every axis has two devices or more.

Every function is right (full marks).
"""

import jax
from jax.sharding import NamedSharding, PartitionSpec as P


def shard_average_shard_map(A, *, mesh):
    # Manual over X only: Y holds columns the mean treats alike, so the partitioner keeps them.
    def local(rows):
        return rows.mean(axis=0, keepdims=True)

    return jax.jit(jax.shard_map(local, mesh=mesh, in_specs=P('X'), out_specs=P('X'), axis_names={'X'}))(A)
