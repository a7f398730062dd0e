"""Bidirectional rings written for even blocks only: both halves are D/nY // 2 columns, so
where D/nY is odd the last column of every block is never sent (the all-gather version
multiplies without it) or never computed (the reduce-scatter version returns one column
short). Right wherever the blocks are even; exactly the odd-block cases fail."""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def reducescatter_matmul_bidirectional(T, W2, *, mesh):
    def local(t, w2):
        n, idx = jax.lax.axis_size('Y'), jax.lax.axis_index('Y')
        block = w2.shape[1] // n
        half = block // 2
        left = [(j, (j - 1) % n) for j in range(n)]
        right = [(j, (j + 1) % n) for j in range(n)]

        def partial(b, which):
            return t @ jax.lax.dynamic_slice_in_dim(w2, b * block + which * half, half, axis=1)

        def step(s, accs):
            lo, hi = accs
            lo = jax.lax.ppermute(lo, 'Y', left) + partial((idx + s + 1) % n, 0)
            hi = jax.lax.ppermute(hi, 'Y', right) + partial((idx - s - 1) % n, 1)
            return lo, hi

        lo, hi = jax.lax.fori_loop(1, n, step, (partial((idx + 1) % n, 0), partial((idx - 1) % n, 1)))
        return jnp.concatenate([lo, hi], axis=1)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P('Y', None)),
                         out_specs=P('X', 'Y'))(T, W2)


def allgather_matmul_bidirectional(A, W, *, mesh):
    def local(a, w):
        n, idx = jax.lax.axis_size('Y'), jax.lax.axis_index('Y')
        chunk = a.shape[1]
        half = chunk // 2
        left = [(j, (j - 1) % n) for j in range(n)]
        right = [(j, (j + 1) % n) for j in range(n)]

        def w_rows(b, which):
            return jax.lax.dynamic_slice_in_dim(w, b * chunk + which * half, half, axis=0)

        def step(s, carry):
            acc, lo, hi = carry
            acc = acc + lo @ w_rows((idx + s) % n, 0) + hi @ w_rows((idx - s) % n, 1)
            return acc, jax.lax.ppermute(lo, 'Y', left), jax.lax.ppermute(hi, 'Y', right)

        acc = jax.lax.pcast(jnp.zeros((a.shape[0], w.shape[1]), a.dtype), ('X', 'Y'), to='varying')
        acc, lo, hi = jax.lax.fori_loop(0, n - 1, step, (acc, a[:, :half], a[:, half:2 * half]))
        return acc + lo @ w_rows((idx + n - 1) % n, 0) + hi @ w_rows((idx - n + 1) % n, 1)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P(None, 'Y')),
                         out_specs=P('X', 'Y'))(A, W)
