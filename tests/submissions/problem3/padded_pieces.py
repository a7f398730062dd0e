"""allreduce_matmul always in 4 equal pieces, F padded up to a multiple of 4: right values and
a split reduction, but where F is not a multiple of 4 (F = 10 on 2x2, F = 18 on 2x4) the
padding is reduced too, and the bytes go over one ring all-reduce of the result (+5%)."""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def allreduce_matmul(A, W, *, mesh):
    F = W.shape[1]
    padded = -(-F // 4) * 4

    def local(a, w):
        w = jnp.pad(w, ((0, 0), (0, padded - F)))
        tiles = jnp.split(w, 4, axis=1)
        return jnp.concatenate([jax.lax.psum(a @ t, 'Y') for t in tiles], axis=1)[:, :F]

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P('Y', None)),
                         out_specs=P('X', None))(A, W)
