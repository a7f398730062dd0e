"""Wrong output sharding: shard_average_jit asks jax.jit for a replicated result
(out_shardings P()), so XLA gathers the averages onto every device.

Broken part: shard_average_jit. Every other function is the reference solution.
"""

import jax
from jax.sharding import NamedSharding, PartitionSpec as P


def shard_average_jit(A, *, mesh):
    nX = mesh.shape['X']
    S, D = A.shape

    def average(a):
        return a.reshape(nX, S // nX, D).mean(axis=1)

    # Broken: P() replicates the result instead of P('X', 'Y').
    return jax.jit(average, out_shardings=NamedSharding(mesh, P()))(A)
