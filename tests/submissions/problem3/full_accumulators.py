"""reducescatter_matmul sending every partial product whole around the ring: right values, nY times the bytes."""

import jax
from jax.sharding import NamedSharding, PartitionSpec as P


def reducescatter_matmul(T, W2, *, mesh):
    def local(t, w2):                     # t: [B/nX, F/nY], w2: [F/nY, D]
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        chunk = w2.shape[1] // n

        def partial(block):               # this device's share of output block `block`
            return t @ jax.lax.dynamic_slice_in_dim(w2, block * chunk, chunk, axis=1)

        def step(s, acc):
            acc = jax.lax.ppermute(acc, 'Y', [(j, (j - 1) % n) for j in range(n)])
            return acc + t @ w2

        total = jax.lax.fori_loop(1, n, step, t @ w2)
        return jax.lax.dynamic_slice_in_dim(total, idx * chunk, chunk, axis=1)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P('Y', None)),
                         out_specs=P('X', 'Y'))(T, W2)
