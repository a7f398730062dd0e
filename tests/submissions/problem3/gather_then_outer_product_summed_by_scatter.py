"""allgather_matmul whose ring of permutes only gathers A, then makes every pairwise product of
the gathered rows and w at once (a broadcast multiply) and sums them with a scatter-add
(jax.ops.segment_sum), not a dot or a reduce: right values and permutes, but the whole
product is made after all the communication."""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def allgather_matmul(A, W, *, mesh):
    def local(a, w):                      # a: [B/nX, D/nY], w: [D, F/nY]
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        blocks = [a]
        for _ in range(1, n):
            blocks.append(jax.lax.ppermute(blocks[-1], 'Y', [(j, (j - 1) % n) for j in range(n)]))
        gathered = jnp.roll(jnp.concatenate(blocks, axis=1), idx * a.shape[1], axis=1)   # [B/nX, D]
        pairs = gathered[:, :, None] * w[None, :, :]                                        # [B/nX, D, F/nY]
        into_one = jnp.zeros((pairs.shape[1],), jnp.int32)
        return jax.vmap(lambda p: jax.ops.segment_sum(p, into_one, num_segments=1)[0])(pairs)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P(None, 'Y')),
                         out_specs=P('X', 'Y'))(A, W)
