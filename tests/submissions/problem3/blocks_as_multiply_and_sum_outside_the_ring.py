"""A ring that only moves data, with every block's product written as a multiply and a sum
(jnp.sum(x[:, :, None] * y[None], 1), no dot) in a loop of its own: allgather_matmul gathers A
around the ring, then multiplies it block by block; reducescatter_matmul makes every block of
its partial product before the ring, which then only adds. Each product one block's size, but
none overlaps a permute."""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def _bmm(x, y):   # one block's product, written as a multiply and a sum (no dot)
    return jnp.sum(x[:, :, None] * y[None, :, :], axis=1)


def allgather_matmul(A, W, *, mesh):
    def local(a, w):
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

        def mm(k, acc):
            ak = jax.lax.dynamic_slice_in_dim(full, k * chunk, chunk, axis=1)
            wk = jax.lax.dynamic_slice_in_dim(w, k * chunk, chunk, axis=0)
            return acc + _bmm(ak, wk)

        acc = jax.lax.pcast(jnp.zeros((a.shape[0], w.shape[1]), a.dtype), ('X', 'Y'), to='varying')
        return jax.lax.fori_loop(0, n, mm, acc)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P(None, 'Y')),
                         out_specs=P('X', 'Y'))(A, W)


def reducescatter_matmul(T, W2, *, mesh):
    def local(t, w2):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        chunk = w2.shape[1] // n

        def mk(k, buf):
            p = _bmm(t, jax.lax.dynamic_slice_in_dim(w2, k * chunk, chunk, axis=1))
            return jax.lax.dynamic_update_slice_in_dim(buf, p, k * chunk, axis=1)

        buf = jax.lax.pcast(jnp.zeros((t.shape[0], w2.shape[1]), t.dtype), ('X', 'Y'), to='varying')
        buf = jax.lax.fori_loop(0, n, mk, buf)

        def part(block):
            return jax.lax.dynamic_slice_in_dim(buf, block * chunk, chunk, axis=1)

        def step(s, acc):
            acc = jax.lax.ppermute(acc, 'Y', [(j, (j - 1) % n) for j in range(n)])
            return acc + part((idx + s + 1) % n)

        return jax.lax.fori_loop(1, n, step, part((idx + 1) % n))

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P('Y', None)),
                         out_specs=P('X', 'Y'))(T, W2)
