"""Broken parts: shard_average_shard_map and block_average_shard_map (style only): a shard_map
that passes its input through, and jax.jit averaging around it by subtracting negated
slices (acc - (-slice)): a sum of slices through a negation."""

import jax
from jax.sharding import NamedSharding, PartitionSpec as P


def _sum(blocks, axis):
    n = blocks.shape[axis]
    acc = jax.lax.index_in_dim(blocks, 0, axis, keepdims=False)
    for i in range(1, n):
        acc = acc - (-jax.lax.index_in_dim(blocks, i, axis, keepdims=False))
    return acc


def shard_average_shard_map(A, *, mesh):
    A = jax.shard_map(lambda a: a, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)
    nX = mesh.shape['X']
    S, D = A.shape

    def average(a):
        return _sum(a.reshape(nX, S // nX, D), 1) / (S // nX)

    return jax.jit(average, out_shardings=NamedSharding(mesh, P('X', 'Y')))(A)


def block_average_shard_map(A, *, mesh):
    A = jax.shard_map(lambda a: a, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)
    nX, nY = mesh.shape['X'], mesh.shape['Y']
    S, D = A.shape

    def average(a):
        blocks = a.reshape(nX, S // nX, nY, D // nY)
        return _sum(_sum(blocks, 1), 2) / ((S // nX) * (D // nY))

    return jax.jit(average, out_shardings=NamedSharding(mesh, P('X', 'Y')))(A)
