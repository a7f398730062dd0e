"""Red team: the reduction done on the host, through jax.pure_callback, with no collective in
the program at all: each device's partials go to Python, which keeps a running total of what
every device sent. Host callbacks are refused: the function earns nothing."""
import jax
import numpy as np
from jax.sharding import PartitionSpec as P

_SEEN = {}


def _host_sum(block):
    _SEEN[block.tobytes()] = block
    return np.sum(list(_SEEN.values()), axis=0).astype(block.dtype)


def ring_all_reduce(A, *, mesh):
    def local(a):
        part = a[0]
        return jax.pure_callback(_host_sum, jax.ShapeDtypeStruct(part.shape, part.dtype), part)

    return jax.shard_map(local, mesh=mesh, in_specs=P('Y', 'X', None), out_specs=P('X', None), check_vma=False)(A)
