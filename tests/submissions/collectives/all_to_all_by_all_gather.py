"""Cheat: the all-to-all as jax.lax.all_gather of the rows, then a slice of one's own columns."""
import jax
from jax.sharding import PartitionSpec as P


def direct_all_to_all(A, *, mesh):
    def local(a):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        whole = jax.lax.all_gather(a, 'Y', axis=0, tiled=True)
        cols = a.shape[1] // n
        return jax.lax.dynamic_slice_in_dim(whole, idx * cols, cols, axis=1)

    return jax.shard_map(local, mesh=mesh, in_specs=P('Y', None), out_specs=P(None, 'Y'))(A)
