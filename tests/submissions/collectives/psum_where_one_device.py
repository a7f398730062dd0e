"""Cheat: the ring everywhere but on a ring of one device, where a psum (or an all_gather)
"does nothing": the compiler drops it, but the lowered program still calls it. Loses the rule
half of the 8x1 case only."""
import jax
from jax.sharding import PartitionSpec as P


def _ring_all_reduce(A, mesh):
    def local(a):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        cols = a.shape[2] // n
        left = [(j, (j - 1) % n) for j in range(n)]

        def share(b):
            return jax.lax.dynamic_slice_in_dim(a[0], b * cols, cols, axis=1)

        acc = share((idx + 1) % n)
        for s in range(1, n):
            acc = jax.lax.ppermute(acc, 'Y', left) + share((idx + s + 1) % n)
        out = jax.lax.dynamic_update_slice_in_dim(a[0] * 0, acc, idx * cols, axis=1)
        for s in range(1, n):
            acc = jax.lax.ppermute(acc, 'Y', left)
            out = jax.lax.dynamic_update_slice_in_dim(out, acc, ((idx + s) % n) * cols, axis=1)
        return out

    return jax.shard_map(local, mesh=mesh, in_specs=P('Y', 'X', None), out_specs=P('X', None), check_vma=False)(A)


def ring_all_reduce(A, *, mesh):
    if mesh.shape['Y'] == 1:              # "nothing to reduce": a psum over one device
        return jax.shard_map(lambda a: jax.lax.psum(a[0], 'Y'), mesh=mesh,
                             in_specs=P('Y', 'X', None), out_specs=P('X', None))(A)
    return _ring_all_reduce(A, mesh)
