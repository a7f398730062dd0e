"""Broken parts: shard_average_shard_map and block_average_shard_map (style only): a shard_map
that passes its input through, and jax.jit averaging around it with a fori_loop (a while loop
adding one dynamic slice per step to its carry: no stablehlo.reduce, and the add has a loop
carry, not two slices, as an operand, so work_outside_shard_map sees nothing)."""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def _loop_sum(blocks, axis):
    """Sum over `axis` with a fori_loop: a while loop whose body adds one dynamic slice to its carry."""
    n = blocks.shape[axis]
    init = jnp.zeros(blocks.shape[:axis] + blocks.shape[axis + 1:], blocks.dtype)
    return jax.lax.fori_loop(
        0, n, lambda i, acc: acc + jax.lax.dynamic_index_in_dim(blocks, i, axis, keepdims=False), init)


def shard_average_shard_map(A, *, mesh):
    A = jax.shard_map(lambda a: a, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)
    nX = mesh.shape['X']
    S, D = A.shape

    def average(a):
        return _loop_sum(a.reshape(nX, S // nX, D), 1) / (S // nX)

    return jax.jit(average, out_shardings=NamedSharding(mesh, P('X', 'Y')))(A)


def block_average_shard_map(A, *, mesh):
    A = jax.shard_map(lambda a: a, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)
    nX, nY = mesh.shape['X'], mesh.shape['Y']
    S, D = A.shape

    def average(a):
        blocks = a.reshape(nX, S // nX, nY, D // nY)
        return _loop_sum(_loop_sum(blocks, 1), 2) / ((S // nX) * (D // nY))

    return jax.jit(average, out_shardings=NamedSharding(mesh, P('X', 'Y')))(A)
