"""Broken parts: shard_average_shard_map and block_average_shard_map (style only): each shard_map
passes its device's block out declared replicated (out_specs=P(), check_vma=False, no psum),
and jax.jit averages that 'replicated' value outside it and tiles it back: right values, no
collective, the work done by jax.jit."""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def shard_average_shard_map(A, *, mesh):
    nX, nY = mesh.shape['X'], mesh.shape['Y']

    @jax.jit
    def f(A):
        local = jax.shard_map(lambda a: a, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P(),
                              check_vma=False)(A)          # [S/nX, D/nY], "replicated"
        m = local.mean(axis=0, keepdims=True)               # jit's reduce, outside the shard_map
        out = jnp.tile(m, (nX, nY))
        return jax.lax.with_sharding_constraint(out, NamedSharding(mesh, P('X', 'Y')))

    return f(A)


def block_average_shard_map(A, *, mesh):
    nX, nY = mesh.shape['X'], mesh.shape['Y']

    @jax.jit
    def f(A):
        local = jax.shard_map(lambda a: a, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P(),
                              check_vma=False)(A)
        m = local.mean(keepdims=True)
        out = jnp.tile(m, (nX, nY))
        return jax.lax.with_sharding_constraint(out, NamedSharding(mesh, P('X', 'Y')))

    return f(A)
