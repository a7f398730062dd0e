"""Hard-coded mesh sizes: block_average_jit reshapes with the literal 2 and 4 of the visible
check's 2x4 mesh, so only that mesh works.

Broken part: block_average_jit. Every other function is the reference solution.
"""

import jax
from jax.sharding import NamedSharding, PartitionSpec as P


def block_average_jit(A, *, mesh):
    S, D = A.shape

    def average(a):
        # Broken: nX = 2 and nY = 4 written in.
        return a.reshape(2, S // 2, 4, D // 4).mean(axis=(1, 3))

    return jax.jit(average, out_shardings=NamedSharding(mesh, P('X', 'Y')))(A)
