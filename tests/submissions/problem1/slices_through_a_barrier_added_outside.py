"""Broken parts: shard_average_shard_map and block_average_shard_map (style only): an identity
shard_map, then jax.jit sums outside it, one row at a time, the rows passed through
jax.lax.optimization_barrier before they are added: right values, the work done by jax.jit.
"""

import jax
from jax.sharding import NamedSharding, PartitionSpec as P


def _rows_summed(a, axis):
    n = a.shape[axis]
    pieces = jax.lax.optimization_barrier([jax.lax.index_in_dim(a, i, axis, keepdims=False) for i in range(n)])
    total = pieces[0]
    for p in pieces[1:]:
        total = total + p
    return total


def shard_average_shard_map(A, *, mesh):
    nX = mesh.shape['X']
    S, D = A.shape
    A = jax.shard_map(lambda b: b, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)
    out = _rows_summed(A.reshape(nX, S // nX, D), 1) / (S // nX)
    return jax.lax.with_sharding_constraint(out, NamedSharding(mesh, P('X', 'Y')))


def block_average_shard_map(A, *, mesh):
    nX, nY = mesh.shape['X'], mesh.shape['Y']
    S, D = A.shape
    A = jax.shard_map(lambda b: b, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)
    a = A.reshape(nX, S // nX, nY, D // nY)
    out = _rows_summed(_rows_summed(a, 3), 1) / ((S // nX) * (D // nY))
    return jax.lax.with_sharding_constraint(out, NamedSharding(mesh, P('X', 'Y')))
