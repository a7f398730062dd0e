"""Adds communication but gets the values right: roll_diff gathers A onto every device, rolls
each X-shard's rows there, and scatters the result back. Right values, rule broken: half marks.

Broken part: roll_diff (communication only). Every other function is the reference solution.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def roll_diff(A, *, mesh, shift):
    nX = mesh.shape['X']
    S, D = A.shape

    def f(a):
        # Broken: replicating A first costs an all-gather the problem never needs.
        a = jax.lax.with_sharding_constraint(a, NamedSharding(mesh, P()))
        blocks = a.reshape(nX, S // nX, D)
        return (jnp.roll(blocks, shift, axis=1) - blocks).reshape(S, D)

    return jax.jit(f, out_shardings=NamedSharding(mesh, P('X', 'Y')))(A)
