"""allgather_matmul whose ring step sends its block only once the step's product is made (a
zero times the product added to the block: a data dependency that changes no value), so the
next product waits for that send: each dot one block's, inside the loop, but the permutes and
the products run strictly in turn and nothing overlaps."""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def allgather_matmul(A, W, *, mesh):
    def local(a, w):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        chunk = a.shape[1]

        def w_rows(i):
            return jax.lax.dynamic_slice_in_dim(w, ((idx + i) % n) * chunk, chunk, axis=0)

        def step(i, carry):
            acc, a = carry
            acc = acc + a @ w_rows(i)
            a = a + 0.0 * jnp.sum(acc)                     # the send waits for the product (a real data dependency)
            a = jax.lax.ppermute(a, 'Y', [(j, (j - 1) % n) for j in range(n)])
            return acc, a

        acc = jax.lax.pcast(jnp.zeros((a.shape[0], w.shape[1]), a.dtype), ('X', 'Y'), to='varying')
        acc, a = jax.lax.fori_loop(0, n - 1, step, (acc, a))
        return acc + a @ w_rows(n - 1)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P(None, 'Y')),
                         out_specs=P('X', 'Y'))(A, W)
