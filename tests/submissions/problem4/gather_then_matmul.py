"""allgather_matmul_bidirectional that runs both half-block rings to the end first, writing every
half into a [B/nX, D] buffer (the whole gathered A), and only then does one matmul: an all-gather
spelled as permutes, nothing overlapped."""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def allgather_matmul_bidirectional(A, W, *, mesh):
    def local(a, w):                      # a: [B/nX, D/nY], w: [D, F/nY]
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        chunk = a.shape[1]
        sizes = (chunk // 2, chunk - chunk // 2)
        left = [(j, (j - 1) % n) for j in range(n)]
        right = [(j, (j + 1) % n) for j in range(n)]
        full = jax.lax.pcast(jnp.zeros((a.shape[0], chunk * n), a.dtype), ('X', 'Y'), to='varying')
        full = jax.lax.dynamic_update_slice_in_dim(full, a, idx * chunk, axis=1)

        def step(s, carry):
            full, lo, hi = carry
            lo = jax.lax.ppermute(lo, 'Y', left)      # first half of chunk idx + s
            hi = jax.lax.ppermute(hi, 'Y', right)     # second half of chunk idx - s
            full = jax.lax.dynamic_update_slice_in_dim(full, lo, ((idx + s) % n) * chunk, axis=1)
            full = jax.lax.dynamic_update_slice_in_dim(full, hi, ((idx - s) % n) * chunk + sizes[0], axis=1)
            return full, lo, hi

        full, _, _ = jax.lax.fori_loop(1, n, step, (full, a[:, :sizes[0]], a[:, sizes[0]:]))
        return full @ w                   # one matmul of the whole gathered A

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P(None, 'Y')),
                         out_specs=P('X', 'Y'))(A, W)
