"""Adds communication: roll_diff rolls the whole array with jax.jit, so rows cross from one
X-shard into the next (a collective-permute over X, and wrong values).

Broken part: roll_diff. Every other function is the reference solution.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def roll_diff(A, *, mesh, shift):
    # Broken: a global roll moves rows from one X-shard into the next.
    return jax.jit(lambda a: jnp.roll(a, shift, axis=0) - a,
                   out_shardings=NamedSharding(mesh, P('X', 'Y')))(A)
