"""Broken parts: shard_average_shard_map and block_average_shard_map (style only): an identity
shard_map, then jax.jit sums outside it by halving, each half cut off by a jax.lax.pad with a
negative edge (a slice written as a pad) and the halves added: no reduce, no slice, right
values, the work done by jax.jit.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


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
