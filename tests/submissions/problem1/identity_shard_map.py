"""A style violation hidden by a decoy: shard_average_shard_map calls a shard_map that passes
its input through, and jax.jit computes the averages around it (the right values, and no
communication, but the work the part asks to write inside a shard_map is jax.jit's). It
keeps the values half of its points.

Broken part: shard_average_shard_map (style only). Every other function is the reference solution.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

from assignments import check, make_mesh, report, show_mesh, show_sharding


def shard_average_jit(A, *, mesh):
    nX = mesh.shape['X']
    S, D = A.shape

    def average(a):
        return a.reshape(nX, S // nX, D).mean(axis=1)

    return jax.jit(average, out_shardings=NamedSharding(mesh, P('X', 'Y')))(A)


def shard_average_shard_map(A, *, mesh):
    # Broken: a shard_map that passes its input through, then jax.jit averages around it.
    A = jax.shard_map(lambda a: a, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)
    return shard_average_jit(A, mesh=mesh)


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
