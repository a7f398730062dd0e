"""A typical first attempt at problem1: two functions right, three with classic mistakes."""
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def shard_average_jit(A, *, mesh):
    # Mistake: asks for a replicated output, so every device needs every shard's
    # average and XLA gathers them across the mesh.
    nX = mesh.shape['X']
    S, D = A.shape
    return jax.jit(lambda a: a.reshape(nX, S // nX, D).mean(axis=1),
                   out_shardings=NamedSharding(mesh, P()))(A)


def shard_average_shard_map(A, *, mesh):
    return jax.shard_map(lambda a: a.mean(axis=0, keepdims=True), mesh=mesh,
                         in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)


def block_average_jit(A, *, mesh):
    # Mistake: hard-coded for the 2x4 mesh of the visible check.
    S, D = A.shape
    out = A.reshape(2, S // 2, 4, D // 4).mean(axis=(1, 3))
    return jax.lax.with_sharding_constraint(out, NamedSharding(mesh, P('X', 'Y')))


def block_average_shard_map(A, *, mesh):
    return jax.shard_map(lambda a: a.mean(keepdims=True), mesh=mesh,
                         in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)


def roll_diff(A, *, mesh, shift):
    # Mistake: rolls the whole array, so rows cross from one X-shard into the next.
    return jnp.roll(A, shift, axis=0) - A
