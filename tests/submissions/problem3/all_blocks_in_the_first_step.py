"""reducescatter_matmul whose ring loop makes every block's product in its first run (a
lax.cond on the step), then only adds blocks made already: one block per dot and every dot
inside the loop, but the later steps have no matmul beside them to overlap."""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def reducescatter_matmul(T, W2, *, mesh):
    def local(t, w2):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        chunk = w2.shape[1] // n

        def all_blocks(_):                          # the whole [B/nX, D] product, block by block
            return jnp.stack([t @ w2[:, b * chunk:(b + 1) * chunk] for b in range(n)])

        def step(s, carry):
            acc, prods = carry
            prods = jax.lax.cond(s == 1, all_blocks, lambda p: p, prods)
            acc = jax.lax.ppermute(acc, 'Y', [(j, (j - 1) % n) for j in range(n)])
            return acc + jnp.take(prods, (idx + s + 1) % n, axis=0), prods

        first = t @ jax.lax.dynamic_slice_in_dim(w2, ((idx + 1) % n) * chunk, chunk, axis=1)
        prods = jax.lax.pcast(jnp.zeros((n,) + first.shape, first.dtype), ('X', 'Y'), to='varying')
        acc, _ = jax.lax.fori_loop(1, n, step, (first, prods))
        return acc

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P('Y', None)),
                         out_specs=P('X', 'Y'))(T, W2)
