"""Mistake: the reduce-scatter's shares sent straight to their owners (a jump of k devices at
step k) and added there. nY-1 permutes of one block, right values, but not a ring: each jump
crosses k links at once."""
import jax
from jax.sharding import PartitionSpec as P


def ring_reduce_scatter(A, *, mesh):
    def local(a):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        cols = a.shape[2] // n

        def share(b):
            return jax.lax.dynamic_slice_in_dim(a[0], b * cols, cols, axis=1)

        total = share(idx)
        for k in range(1, n):
            total = total + jax.lax.ppermute(share((idx + k) % n), 'Y', [(j, (j + k) % n) for j in range(n)])
        return total

    return jax.shard_map(local, mesh=mesh, in_specs=P('Y', 'X', None), out_specs=P('X', 'Y'))(A)
