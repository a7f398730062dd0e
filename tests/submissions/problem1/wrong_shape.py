"""Wrong shape: shard_average_jit broadcasts each shard's average back over the shard's rows,
returning [S, D] instead of [nX, D].

Broken part: shard_average_jit. Every other function is the reference solution.
"""
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def shard_average_jit(A, *, mesh):
    nX = mesh.shape['X']
    S, D = A.shape

    def average(a):
        means = a.reshape(nX, S // nX, D).mean(axis=1)
        # Broken: one row per input row, not one per X-shard.
        return jnp.repeat(means, S // nX, axis=0)

    return jax.jit(average, out_shardings=NamedSharding(mesh, P('X', 'Y')))(A)


def shard_average_shard_map(A, *, mesh):
    def local(block):
        return block.mean(axis=0, keepdims=True)

    return jax.shard_map(local, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)


def block_average_jit(A, *, mesh):
    nX, nY = mesh.shape['X'], mesh.shape['Y']
    S, D = A.shape

    def average(a):
        return a.reshape(nX, S // nX, nY, D // nY).mean(axis=(1, 3))

    return jax.jit(average, out_shardings=NamedSharding(mesh, P('X', 'Y')))(A)


def block_average_shard_map(A, *, mesh):
    def local(block):
        return block.mean(keepdims=True)

    return jax.shard_map(local, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)


def roll_diff(A, *, mesh, shift):
    def local(block):
        return jnp.roll(block, shift, axis=0) - block

    return jax.shard_map(local, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)
