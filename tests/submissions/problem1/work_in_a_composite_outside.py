"""Broken parts: shard_average_shard_map and block_average_shard_map (style only): an identity
shard_map, then jax.jit averages outside it inside a jax.lax.composite (its body is a function
of its own, which XLA inlines): right values, the work done by jax.jit.
"""


# Run this cell first. It asks JAX for 8 simulated CPU devices, which must happen
# before anything else touches JAX (if it complains, restart the kernel and run it first).
import assignments
assignments.setup_devices(8, announce=True)

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


def block_average_jit(A, *, mesh):
    nX, nY = mesh.shape['X'], mesh.shape['Y']
    S, D = A.shape

    def average(a):
        return a.reshape(nX, S // nX, nY, D // nY).mean(axis=(1, 3))

    return jax.jit(average, out_shardings=NamedSharding(mesh, P('X', 'Y')))(A)


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


def shard_average_shard_map(A, *, mesh):
    nX = mesh.shape['X']
    S, D = A.shape
    passed = jax.shard_map(lambda b: b, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)

    def average(a):
        return a.reshape(nX, S // nX, D).mean(axis=1)
    out = jax.lax.composite(average, name="kit.average")(passed)
    return jax.lax.with_sharding_constraint(out, NamedSharding(mesh, P('X', 'Y')))


def block_average_shard_map(A, *, mesh):
    nX, nY = mesh.shape['X'], mesh.shape['Y']
    S, D = A.shape
    passed = jax.shard_map(lambda b: b, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)

    def average(a):
        return a.reshape(nX, S // nX, nY, D // nY).mean(axis=(1, 3))
    out = jax.lax.composite(average, name="kit.average")(passed)
    return jax.lax.with_sharding_constraint(out, NamedSharding(mesh, P('X', 'Y')))
