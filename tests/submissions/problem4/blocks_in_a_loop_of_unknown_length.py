"""Bidirectional rings that carry data only, every block's product (one dot each) in a
jax.lax.while_loop of its own whose bound the compiler cannot know (nY, plus isnan of an
element: always nY): reducescatter_matmul_bidirectional makes every block before the rings,
allgather_matmul_bidirectional multiplies the gathered blocks after them."""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def reducescatter_matmul_bidirectional(T, W2, *, mesh):
    def local(t, w2):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        block = w2.shape[1] // n
        sizes = (block // 2, block - block // 2)
        left = [(j, (j - 1) % n) for j in range(n)]
        right = [(j, (j + 1) % n) for j in range(n)]

        def mk(k, buf):                   # before the rings: block k of the partial product
            p = t @ jax.lax.dynamic_slice_in_dim(w2, k * block, block, axis=1)
            return jax.lax.dynamic_update_slice_in_dim(buf, p, k * block, axis=1)

        buf = jax.lax.pcast(jnp.zeros((t.shape[0], w2.shape[1]), t.dtype), ('X', 'Y'), to='varying')
        stop = n + jnp.isnan(t.reshape(-1)[0]).astype(jnp.int32)      # always n; unknown to the compiler
        k0 = jax.lax.pcast(jnp.int32(0), ('X', 'Y'), to='varying')
        buf = jax.lax.while_loop(lambda c: c[0] < stop, lambda c: (c[0] + 1, mk(c[0], c[1])), (k0, buf))[1]

        def partial(b, half):
            return jax.lax.dynamic_slice_in_dim(buf, b * block + half * sizes[0], sizes[half], axis=1)

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
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        chunk = a.shape[1]
        sizes = (chunk // 2, chunk - chunk // 2)
        left = [(j, (j - 1) % n) for j in range(n)]
        right = [(j, (j + 1) % n) for j in range(n)]
        full = jax.lax.pcast(jnp.zeros((a.shape[0], chunk * n), a.dtype), ('X', 'Y'), to='varying')
        full = jax.lax.dynamic_update_slice_in_dim(full, a, idx * chunk, axis=1)

        def step(s, carry):
            full, lo, hi = carry
            lo = jax.lax.ppermute(lo, 'Y', left)     # first half of chunk idx + s
            hi = jax.lax.ppermute(hi, 'Y', right)    # second half of chunk idx - s
            full = jax.lax.dynamic_update_slice_in_dim(full, lo, ((idx + s) % n) * chunk, axis=1)
            full = jax.lax.dynamic_update_slice_in_dim(full, hi, ((idx - s) % n) * chunk + sizes[0], axis=1)
            return full, lo, hi

        full, _, _ = jax.lax.fori_loop(1, n, step, (full, a[:, :sizes[0]], a[:, sizes[0]:]))

        def mm(k, acc):                   # after the rings: one block product per pass
            ak = jax.lax.dynamic_slice_in_dim(full, k * chunk, chunk, axis=1)
            wk = jax.lax.dynamic_slice_in_dim(w, k * chunk, chunk, axis=0)
            return acc + ak @ wk

        acc = jax.lax.pcast(jnp.zeros((a.shape[0], w.shape[1]), a.dtype), ('X', 'Y'), to='varying')
        stop = n + jnp.isnan(a.reshape(-1)[0]).astype(jnp.int32)      # always n; unknown to the compiler
        k0 = jax.lax.pcast(jnp.int32(0), ('X', 'Y'), to='varying')
        return jax.lax.while_loop(lambda c: c[0] < stop, lambda c: (c[0] + 1, mm(c[0], c[1])), (k0, acc))[1]

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P(None, 'Y')),
                         out_specs=P('X', 'Y'))(A, W)
