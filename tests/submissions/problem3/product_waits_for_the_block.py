"""reducescatter_matmul whose step's product waits for the block the step's permute brings (a
zero times it added to T), and whose next permute sends that product: each dot one block's,
inside the loop, but the permutes and the products run strictly in turn."""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def reducescatter_matmul(T, W2, *, mesh):
    def local(t, w2):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        chunk = w2.shape[1] // n

        def partial(tt, block):
            return tt @ jax.lax.dynamic_slice_in_dim(w2, block * chunk, chunk, axis=1)

        def step(s, acc):
            recv = jax.lax.ppermute(acc, 'Y', [(j, (j - 1) % n) for j in range(n)])
            tt = t + 0.0 * jnp.sum(recv)          # the product cannot start before the block arrives
            return recv + partial(tt, (idx + s + 1) % n)

        return jax.lax.fori_loop(1, n, step, partial(t, (idx + 1) % n))

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P('Y', None)),
                         out_specs=P('X', 'Y'))(T, W2)
