"""The book's worked example as printed: no pcast of the accumulator, so the loop carry's varying axes do not match."""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def allgather_matmul(A, W, *, mesh):
    def local(a, w):                      # a: [B/nX, D/nY], w: [D, F/nY]
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        chunk = a.shape[1]

        def w_rows(i):                    # the rows of w that meet the A-chunk held at step i
            return jax.lax.dynamic_slice_in_dim(w, ((idx + i) % n) * chunk, chunk, axis=0)

        def step(i, carry):
            acc, a = carry
            acc = acc + a @ w_rows(i)
            a = jax.lax.ppermute(a, 'Y', [(j, (j - 1) % n) for j in range(n)])
            return acc, a

        acc = jnp.zeros((a.shape[0], w.shape[1]), a.dtype)
        acc, a = jax.lax.fori_loop(0, n - 1, step, (acc, a))
        return acc + a @ w_rows(n - 1)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P(None, 'Y')),
                         out_specs=P('X', 'Y'))(A, W)
