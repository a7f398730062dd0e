"""A right answer: shard_average_shard_map written with a shard_map that is manual over X only
(axis_names={'X'}, Y left to the partitioner). On a 1xN mesh JAX inlines that shard_map (its
one manual axis has one device), so the compiled program shows none there: the style must be
judged only where every axis has two devices or more.

Every function is right (full marks).
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
    # Manual over X only: Y holds columns the mean treats alike, so the partitioner keeps them.
    def local(rows):
        return rows.mean(axis=0, keepdims=True)

    return jax.jit(jax.shard_map(local, mesh=mesh, in_specs=P('X'), out_specs=P('X'), axis_names={'X'}))(A)


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
