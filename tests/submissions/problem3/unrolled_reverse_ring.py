"""Full marks expected: an unrolled loop and a ring running the other way."""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def allgather_matmul(A, W, *, mesh):
    def local(a, w):                      # a: [B/nX, D/nY], w: [D, F/nY]
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        chunk = a.shape[1]

        def w_rows(i):                    # the rows of w that meet the A-chunk held at step i
            return jax.lax.dynamic_slice_in_dim(w, ((idx - i) % n) * chunk, chunk, axis=0)

        def step(i, carry):
            acc, a = carry
            acc = acc + a @ w_rows(i)
            a = jax.lax.ppermute(a, 'Y', [(j, (j + 1) % n) for j in range(n)])
            return acc, a

        acc = jax.lax.pcast(jnp.zeros((a.shape[0], w.shape[1]), a.dtype), ('X', 'Y'), to='varying')
        acc, a = jax.lax.fori_loop(0, n - 1, step, (acc, a), unroll=True)
        return acc + a @ w_rows(n - 1)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P(None, 'Y')),
                         out_specs=P('X', 'Y'))(A, W)
