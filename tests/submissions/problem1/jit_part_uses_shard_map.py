"""A style violation: shard_average_jit must use jax.jit only, but is written with shard_map.
The values are right, so it keeps the values half of its points.

Broken part: shard_average_jit (style only). Every other function is the reference solution.
"""
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def shard_average_jit(A, *, mesh):
    # Broken: the right values, but this exercise is about what jax.jit does on its own.
    def local(block):
        return block.mean(axis=0, keepdims=True)

    return jax.shard_map(local, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)


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
