"""Wrong shape: shard_average_jit broadcasts each shard's average back over the shard's rows,
returning [S, D] instead of [nX, D].

Broken part: shard_average_jit. Every other function is the reference solution.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def shard_average_jit(A, *, mesh):
    nX = mesh.shape['X']
    S, D = A.shape

    def average(a):
        means = a.reshape(nX, S // nX, D).mean(axis=1)
        # Broken: one row per input row, not one per X-shard.
        return jnp.repeat(means, S // nX, axis=0)

    return jax.jit(average, out_shardings=NamedSharding(mesh, P('X', 'Y')))(A)
