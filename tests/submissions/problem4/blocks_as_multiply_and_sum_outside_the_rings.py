"""Bidirectional rings that carry data only, every block's product written as a multiply and a sum
(no dot) in a loop of its own: allreduce_matmul_bidirectional and
reducescatter_matmul_bidirectional make every block of the partial product before the rings;
allgather_matmul_bidirectional gathers A around both rings, then multiplies it block by block.
Each product one block's size, but none overlaps a permute."""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def _bmm(x, y):   # one block's product as a multiply and a sum (no dot)
    return jnp.sum(x[:, :, None] * y[None, :, :], axis=1)


def allreduce_matmul_bidirectional(A, W, *, mesh):
    def local(a, w):                      # a: [B/nX, D/nY], w: [D/nY, F]
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        block = w.shape[1] // n
        sizes = (block // 2, block - block // 2)
        left = [(j, (j - 1) % n) for j in range(n)]
        right = [(j, (j + 1) % n) for j in range(n)]

        def start(b, half):               # where one half of block b begins along F
            return b * block + half * sizes[0]

        def mk(k, buf):                   # before the rings: block k of the partial product
            p = _bmm(a, jax.lax.dynamic_slice_in_dim(w, k * block, block, axis=1))
            return jax.lax.dynamic_update_slice_in_dim(buf, p, k * block, axis=1)

        buf = jax.lax.pcast(jnp.zeros((a.shape[0], w.shape[1]), a.dtype), ('X', 'Y'), to='varying')
        buf = jax.lax.fori_loop(0, n, mk, buf)

        def partial(b, half):
            return jax.lax.dynamic_slice_in_dim(buf, start(b, half), sizes[half], axis=1)

        # Reduce-scatter around both rings: device idx ends with block idx fully summed.
        def reduce_step(s, accs):
            lo, hi = accs
            lo = jax.lax.ppermute(lo, 'Y', left) + partial((idx + s + 1) % n, 0)
            hi = jax.lax.ppermute(hi, 'Y', right) + partial((idx - s - 1) % n, 1)
            return lo, hi

        lo, hi = jax.lax.fori_loop(1, n, reduce_step, (partial((idx + 1) % n, 0), partial((idx - 1) % n, 1)))

        # All-gather around both rings: every device collects every block.
        out = jnp.zeros((a.shape[0], w.shape[1]), a.dtype)
        out = jax.lax.dynamic_update_slice_in_dim(out, lo, start(idx, 0), axis=1)
        out = jax.lax.dynamic_update_slice_in_dim(out, hi, start(idx, 1), axis=1)

        def gather_step(s, carry):
            out, lo, hi = carry
            lo = jax.lax.ppermute(lo, 'Y', left)      # now the first half of block idx + s
            hi = jax.lax.ppermute(hi, 'Y', right)     # now the second half of block idx - s
            out = jax.lax.dynamic_update_slice_in_dim(out, lo, start((idx + s) % n, 0), axis=1)
            out = jax.lax.dynamic_update_slice_in_dim(out, hi, start((idx - s) % n, 1), axis=1)
            return out, lo, hi

        out, _, _ = jax.lax.fori_loop(1, n, gather_step, (out, lo, hi))
        return out

    # Every device ends with the same sum, but JAX cannot prove it (no psum), so the
    # replication check over Y is switched off for this function.
    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P('Y', None)),
                         out_specs=P('X', None), check_vma=False)(A, W)


def reducescatter_matmul_bidirectional(T, W2, *, mesh):
    def local(t, w2):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        block = w2.shape[1] // n
        sizes = (block // 2, block - block // 2)
        left = [(j, (j - 1) % n) for j in range(n)]
        right = [(j, (j + 1) % n) for j in range(n)]

        def mk(k, buf):                   # before the rings: block k of the partial product
            p = _bmm(t, jax.lax.dynamic_slice_in_dim(w2, k * block, block, axis=1))
            return jax.lax.dynamic_update_slice_in_dim(buf, p, k * block, axis=1)

        buf = jax.lax.pcast(jnp.zeros((t.shape[0], w2.shape[1]), t.dtype), ('X', 'Y'), to='varying')
        buf = jax.lax.fori_loop(0, n, mk, buf)

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
            return acc + _bmm(ak, wk)

        acc = jax.lax.pcast(jnp.zeros((a.shape[0], w.shape[1]), a.dtype), ('X', 'Y'), to='varying')
        return jax.lax.fori_loop(0, n, mm, acc)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P(None, 'Y')),
                         out_specs=P('X', 'Y'))(A, W)
