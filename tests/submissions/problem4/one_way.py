"""The one-way collective matmuls of problem3, submitted as the bidirectional ones."""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def allgather_matmul_bidirectional(A, W, *, mesh):
    def local(a, w):                      # a: [B/nX, D/nY], w: [D, F/nY]
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        chunk = a.shape[1]

        def w_rows(i):                    # the rows of w that meet the chunk held at step i
            return jax.lax.dynamic_slice_in_dim(w, ((idx + i) % n) * chunk, chunk, axis=0)

        def step(i, carry):
            acc, a = carry
            acc = acc + a @ w_rows(i)
            a = jax.lax.ppermute(a, 'Y', [(j, (j - 1) % n) for j in range(n)])
            return acc, a

        acc = jax.lax.pcast(jnp.zeros((a.shape[0], w.shape[1]), a.dtype), ('X', 'Y'), to='varying')
        acc, a = jax.lax.fori_loop(0, n - 1, step, (acc, a))
        return acc + a @ w_rows(n - 1)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P(None, 'Y')),
                         out_specs=P('X', 'Y'))(A, W)


def allreduce_matmul_bidirectional(A, W, *, mesh):
    F = W.shape[1]
    pieces = next(k for k in (4, 2, 1) if F % k == 0)

    def local(a, w):                      # a: [B/nX, D/nY], w: [D/nY, F]
        tiles = jnp.split(w, pieces, axis=1)
        return jnp.concatenate([jax.lax.psum(a @ t, 'Y') for t in tiles], axis=1)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P('Y', None)),
                         out_specs=P('X', None))(A, W)


def reducescatter_matmul_bidirectional(T, W2, *, mesh):
    def local(t, w2):                     # t: [B/nX, F/nY], w2: [F/nY, D]
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        chunk = w2.shape[1] // n

        def partial(block):               # this device's share of output block `block`
            return t @ jax.lax.dynamic_slice_in_dim(w2, block * chunk, chunk, axis=1)

        def step(s, acc):
            acc = jax.lax.ppermute(acc, 'Y', [(j, (j - 1) % n) for j in range(n)])
            return acc + partial((idx + s + 1) % n)

        return jax.lax.fori_loop(1, n, step, partial((idx + 1) % n))

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P('Y', None)),
                         out_specs=P('X', 'Y'))(T, W2)
