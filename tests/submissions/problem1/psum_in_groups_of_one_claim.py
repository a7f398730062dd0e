"""Broken parts: shard_average_shard_map and block_average_shard_map (style only): each shard_map
declares its device's block replicated (out_specs=P(), check_vma=False) after a psum in groups
of one device (axis_index_groups=[[0], [1], ...]), which combines nothing; jax.jit averages that
'replicated' value outside the shard_map and tiles it back: right values, no data moved, the
work done by jax.jit (replicated_claim_passes_through with a psum that is not one).
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def _mine(A, mesh):
    nY, nX = mesh.shape['Y'], mesh.shape['X']

    def local(block):   # a psum in groups of one device: lowers to an all_reduce, moves nothing
        return jax.lax.psum(block, ('X', 'Y'), axis_index_groups=[[d] for d in range(nX * nY)])
    return jax.shard_map(local, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P(), check_vma=False)(A)


def shard_average_shard_map(A, *, mesh):
    nX, nY = mesh.shape['X'], mesh.shape['Y']
    m = _mine(A, mesh).mean(axis=0, keepdims=True)        # jit's reduce, outside the shard_map
    return jax.lax.with_sharding_constraint(jnp.tile(m, (nX, nY)), NamedSharding(mesh, P('X', 'Y')))


def block_average_shard_map(A, *, mesh):
    nX, nY = mesh.shape['X'], mesh.shape['Y']
    m = _mine(A, mesh).mean(keepdims=True)
    return jax.lax.with_sharding_constraint(jnp.tile(m, (nX, nY)), NamedSharding(mesh, P('X', 'Y')))
