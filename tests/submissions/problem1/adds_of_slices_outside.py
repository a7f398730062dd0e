"""Broken parts: shard_average_shard_map and block_average_shard_map (style only), written with a shard_map that passes its
input through, and jax.jit averaging around it with slices and adds (no stablehlo.reduce,
so work_outside_shard_map sees no work outside the shard_map)."""

import functools
import operator
import jax
from jax.sharding import NamedSharding, PartitionSpec as P


def _sum_by_adds(blocks, axis):
    n = blocks.shape[axis]
    parts = [jax.lax.index_in_dim(blocks, i, axis, keepdims=False) for i in range(n)]
    return functools.reduce(operator.add, parts)


def shard_average_shard_map(A, *, mesh):
    A = jax.shard_map(lambda a: a, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)
    nX = mesh.shape['X']
    S, D = A.shape

    def average(a):
        blocks = a.reshape(nX, S // nX, D)
        return _sum_by_adds(blocks, 1) / (S // nX)

    return jax.jit(average, out_shardings=NamedSharding(mesh, P('X', 'Y')))(A)


def block_average_shard_map(A, *, mesh):
    A = jax.shard_map(lambda a: a, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)
    nX, nY = mesh.shape['X'], mesh.shape['Y']
    S, D = A.shape

    def average(a):
        blocks = a.reshape(nX, S // nX, nY, D // nY)
        rows = _sum_by_adds(blocks, 1)          # [nX, nY, D/nY]
        return _sum_by_adds(rows, 2) / ((S // nX) * (D // nY))

    return jax.jit(average, out_shardings=NamedSharding(mesh, P('X', 'Y')))(A)
