"""allreduce_matmul that makes the whole [B/nX, F] partial product first, as two matmuls over
halves of the contracting dimension added together (or over halves of the rows, where a
device holds one column of A), then slices it into pieces and psums each: no one matmul is
the whole product, but every piece waits for both, so no reduction overlaps a matmul."""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def allreduce_matmul(A, W, *, mesh):
    F = W.shape[1]
    pieces = next(k for k in (4, 2) if F % k == 0)

    def local(a, w):                      # a: [B/nX, D/nY], w: [D/nY, F]
        k = a.shape[1]
        if k >= 2:
            h = k // 2
            whole = a[:, :h] @ w[:h] + a[:, h:] @ w[h:]
        else:
            r = a.shape[0] // 2
            whole = jnp.concatenate([a[:r] @ w, a[r:] @ w], axis=0)
        tiles = jnp.array_split(whole, pieces, axis=1)
        return jnp.concatenate([jax.lax.psum(t, 'Y') for t in tiles], axis=1)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P('Y', None)),
                         out_specs=P('X', None))(A, W)
