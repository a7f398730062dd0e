"""Mistake: no shard_map at all: jax.jit with the result's sharding, so XLA inserts its own
all-gather. Right values, every rule half lost."""
import jax
from jax.sharding import NamedSharding, PartitionSpec as P


def ring_all_gather(A, *, mesh):
    return jax.jit(lambda a: a, out_shardings=NamedSharding(mesh, P('X', None)))(A)
