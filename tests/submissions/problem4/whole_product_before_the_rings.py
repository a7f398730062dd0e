"""reducescatter_matmul_bidirectional that computes the whole [B/nX, D] partial product in one
matmul before either ring starts, then passes halves of its slices both ways: a bidirectional
reduce-scatter of the whole product, with no matmul left to overlap."""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def reducescatter_matmul_bidirectional(T, W2, *, mesh):
    def local(t, w2):                     # t: [B/nX, F/nY], w2: [F/nY, D]
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        block = w2.shape[1] // n
        sizes = (block // 2, block - block // 2)
        left = [(j, (j - 1) % n) for j in range(n)]
        right = [(j, (j + 1) % n) for j in range(n)]
        whole = t @ w2                    # the whole [B/nX, D] partial product before any step

        def partial(b, half):
            return jax.lax.dynamic_slice_in_dim(whole, b * block + half * sizes[0], sizes[half], axis=1)

        def step(s, accs):
            lo, hi = accs
            lo = jax.lax.ppermute(lo, 'Y', left) + partial((idx + s + 1) % n, 0)
            hi = jax.lax.ppermute(hi, 'Y', right) + partial((idx - s - 1) % n, 1)
            return lo, hi

        lo, hi = jax.lax.fori_loop(1, n, step, (partial((idx + 1) % n, 0), partial((idx - 1) % n, 1)))
        return jnp.concatenate([lo, hi], axis=1)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P('Y', None)),
                         out_specs=P('X', 'Y'))(T, W2)
