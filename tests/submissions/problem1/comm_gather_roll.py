"""Adds communication but gets the values right: roll_diff gathers A onto every device, rolls
each X-shard's rows there, and scatters the result back. Right values, rule broken: half marks.

Broken part: roll_diff (communication only). Every other function is the reference solution.
"""
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def shard_average_jit(A, *, mesh):
    nX = mesh.shape['X']
    S, D = A.shape

    def average(a):
        return a.reshape(nX, S // nX, D).mean(axis=1)

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
    nX = mesh.shape['X']
    S, D = A.shape

    def f(a):
        # Broken: replicating A first costs an all-gather the problem never needs.
        a = jax.lax.with_sharding_constraint(a, NamedSharding(mesh, P()))
        blocks = a.reshape(nX, S // nX, D)
        return (jnp.roll(blocks, shift, axis=1) - blocks).reshape(S, D)

    return jax.jit(f, out_shardings=NamedSharding(mesh, P('X', 'Y')))(A)
