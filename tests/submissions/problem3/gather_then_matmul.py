"""allgather_matmul (and transformer_block) that runs the ring of nY-1 neighbour permutes
first, writing every block of A into a [B/nX, D] buffer (the whole gathered operand), and only
then does one matmul of the gathered A: an all-gather spelled as permutes, no overlap."""

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def allgather_matmul(A, W, *, mesh):
    def local(a, w):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        chunk = a.shape[1]
        full = jax.lax.pcast(jnp.zeros((a.shape[0], chunk * n), a.dtype), ('X', 'Y'), to='varying')
        full = jax.lax.dynamic_update_slice_in_dim(full, a, idx * chunk, axis=1)

        def step(i, carry):
            full, blk = carry
            blk = jax.lax.ppermute(blk, 'Y', [(j, (j - 1) % n) for j in range(n)])
            full = jax.lax.dynamic_update_slice_in_dim(full, blk, ((idx + i) % n) * chunk, axis=1)
            return full, blk

        full, _ = jax.lax.fori_loop(1, n, step, (full, a))
        return full @ w

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P(None, 'Y')),
                         out_specs=P('X', 'Y'))(A, W)
