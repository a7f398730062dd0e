"""Red team: the psum hidden in a jax.jit inside the shard_map (a function the program calls).
The lowered program still holds its all_reduce: every case loses its rule half."""
import jax
from jax.sharding import PartitionSpec as P


@jax.jit
def _add_up(x):
    return jax.lax.psum(x, 'Y')


def ring_all_reduce(A, *, mesh):
    return jax.shard_map(lambda a: _add_up(a[0]), mesh=mesh, in_specs=P('Y', 'X', None),
                         out_specs=P('X', None))(A)
