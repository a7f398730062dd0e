"""A layer written with an all-gather of the weights: right values, wasted traffic."""

import jax
from jax.sharding import NamedSharding, PartitionSpec as P

ALL = ('X', 'Y')


def layer_shard_map(x, w, b, *, mesh):
    # Gathers all of x and w onto every device, then computes the whole layer locally.
    def local(x, w, b):
        x = jax.lax.all_gather(x, ALL, tiled=True)
        w = jax.lax.all_gather(w, ALL, tiled=True)
        return jax.nn.sigmoid(x @ w + b)
    return jax.shard_map(local, mesh=mesh, in_specs=(P(ALL), P(ALL), P()), out_specs=P(),
                         check_vma=False)(x, w, b)
