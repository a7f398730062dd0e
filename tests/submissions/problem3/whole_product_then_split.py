"""allreduce_matmul that makes the whole partial product first and then reduces it in two
psums, one per half of F: two pieces, right values and bytes, but neither reduction can
overlap a matmul, since the one matmul is done before either starts."""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def allreduce_matmul(A, W, *, mesh):
    def local(a, w):                      # a: [B/nX, D/nY], w: [D/nY, F]
        y = a @ w                         # the whole [B/nX, F] partial product, at once
        h = y.shape[1] // 2
        return jnp.concatenate([jax.lax.psum(y[:, :h], 'Y'), jax.lax.psum(y[:, h:], 'Y')], axis=1)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P('Y', None)),
                         out_specs=P('X', None))(A, W)
