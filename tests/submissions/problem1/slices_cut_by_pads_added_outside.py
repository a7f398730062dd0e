"""Broken parts: shard_average_shard_map and block_average_shard_map (style only): an identity
shard_map, then jax.jit sums outside it by halving, each half cut off by a jax.lax.pad with a
negative edge (a slice written as a pad) and the halves added: no reduce, no slice, right
values, the work done by jax.jit.
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

def _halving_sum(a, axis):
    """Sum over `axis` with negative pads (crops) and adds: no reduce, no slice."""
    n = a.shape[axis]
    zero = jnp.zeros((), a.dtype)
    while n > 1:
        if n % 2:
            cfg = [(0, 0, 0)] * a.ndim; cfg[axis] = (0, 1, 0)
            a = jax.lax.pad(a, zero, cfg); n += 1
        h = n // 2
        lo = [(0, 0, 0)] * a.ndim; lo[axis] = (0, -h, 0)
        hi = [(0, 0, 0)] * a.ndim; hi[axis] = (-h, 0, 0)
        a = jax.lax.pad(a, zero, lo) + jax.lax.pad(a, zero, hi)
        n = h
    return a

def shard_average_shard_map(A, *, mesh):
    nX = mesh.shape['X']
    S, D = A.shape
    A = jax.shard_map(lambda b: b, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)
    s = _halving_sum(A.reshape(nX, S // nX, D), 1).reshape(nX, D) / (S // nX)
    return jax.lax.with_sharding_constraint(s, NamedSharding(mesh, P('X', 'Y')))

def block_average_shard_map(A, *, mesh):
    nX, nY = mesh.shape['X'], mesh.shape['Y']
    S, D = A.shape
    A = jax.shard_map(lambda b: b, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)
    a = A.reshape(nX, S // nX, nY, D // nY)
    s = _halving_sum(_halving_sum(a, 1), 3).reshape(nX, nY) / ((S // nX) * (D // nY))
    return jax.lax.with_sharding_constraint(s, NamedSharding(mesh, P('X', 'Y')))

