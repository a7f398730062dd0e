"""shard_average_shard_map: a pass-through shard_map, and jax.jit averaging around it with a
triangular_solve (a running sum down each shard's rows; no reduce, dot or slice-add). Style only."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P


def shard_average_jit(A, *, mesh):
    nX = mesh.shape['X']
    S, D = A.shape

    def average(a):
        return a.reshape(nX, S // nX, D).mean(axis=1)

    return jax.jit(average, out_shardings=NamedSharding(mesh, P('X', 'Y')))(A)


def shard_average_shard_map(A, *, mesh):
    A = jax.shard_map(lambda a: a, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)
    nX = mesh.shape['X']
    S, D = A.shape
    r = S // nX

    def average(a):
        blocks = a.reshape(nX, r, D)
        # L = I - (ones below the diagonal by one): L^-1 is the lower-triangular ones matrix, so
        # the solve is a running sum down each shard's rows; its last row is the shard's sum.
        L = jnp.eye(r, dtype=a.dtype) - jnp.eye(r, k=-1, dtype=a.dtype)
        cols = jnp.swapaxes(blocks, 1, 2)[..., None]           # [nX, D, r, 1]: batch dims nX, D
        L = jnp.broadcast_to(L, (nX, D, r, r))
        running = jax.lax.linalg.triangular_solve(L, cols, left_side=True, lower=True)
        return running[:, :, -1, 0] / r

    return jax.jit(average, out_shardings=NamedSharding(mesh, P('X', 'Y')))(A)

def block_average_jit(A, *, mesh):
    nX, nY = mesh.shape['X'], mesh.shape['Y']
    S, D = A.shape

    def average(a):
        return a.reshape(nX, S // nX, nY, D // nY).mean(axis=(1, 3))

    return jax.jit(average, out_shardings=NamedSharding(mesh, P('X', 'Y')))(A)


def block_average_shard_map(A, *, mesh):
    def local(block):
        return block.mean(keepdims=True)          # [1, 1] per device

    return jax.shard_map(local, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)


def roll_diff(A, *, mesh, shift):
    def local(block):
        return jnp.roll(block, shift, axis=0) - block

    return jax.shard_map(local, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)


def roll_diff_jit(A, *, mesh, shift):
    nX = mesh.shape['X']
    S, D = A.shape

    def rolled(a):
        blocks = a.reshape(nX, S // nX, D)          # axis 0 follows the X-sharding
        return (jnp.roll(blocks, shift, axis=1) - blocks).reshape(S, D)

    return jax.jit(rolled, out_shardings=NamedSharding(mesh, P('X', 'Y')))(A)
