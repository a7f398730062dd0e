"""Cheat: a shard_map that sends nothing (to pass S002), and the gather left to jax.jit around it:
a jnp.take of columns another device holds, then the result constrained to P('X', None). XLA
inserts the collective itself: not a ppermute ring (C003, C005) wherever nY > 1."""
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def ring_all_gather(A, *, mesh):
    B = jax.shard_map(lambda a: a * 1, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)
    D = A.shape[1]
    moved = jnp.take(B, (jnp.arange(D) + 1) % D, axis=1)
    back = jnp.take(moved, (jnp.arange(D) - 1) % D, axis=1)
    return jax.lax.with_sharding_constraint(back, NamedSharding(mesh, P('X', None)))
