"""allgather_matmul / reducescatter_matmul whose ring is unrolled in Python (straight-line
permutes that only move data), with every block product made in a compute-only fori_loop
after (allgather) or before (reducescatter) the whole ring: each dot is one block's, but
none runs beside a permute."""

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def allgather_matmul(A, W, *, mesh):
    def local(a, w):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        chunk = a.shape[1]
        blocks = [a]
        blk = a
        for _ in range(1, n):             # the ring, unrolled: it only moves data
            blk = jax.lax.ppermute(blk, 'Y', [(j, (j - 1) % n) for j in range(n)])
            blocks.append(blk)
        stacked = jnp.stack(blocks)       # [n, B/nX, D/nY]: block i came from device idx+i

        def mm(i, acc):                   # after the ring: one block product per iteration
            ai = jax.lax.dynamic_index_in_dim(stacked, i, 0, keepdims=False)
            wi = jax.lax.dynamic_slice_in_dim(w, ((idx + i) % n) * chunk, chunk, axis=0)
            return acc + ai @ wi

        acc = jax.lax.pcast(jnp.zeros((a.shape[0], w.shape[1]), a.dtype), ('X', 'Y'), to='varying')
        return jax.lax.fori_loop(0, n, mm, acc)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P(None, 'Y')),
                         out_specs=P('X', 'Y'))(A, W)


def reducescatter_matmul(T, W2, *, mesh):
    def local(t, w2):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        chunk = w2.shape[1] // n

        def mk(k, buf):                   # before the ring: every partial block
            p = t @ jax.lax.dynamic_slice_in_dim(w2, k * chunk, chunk, axis=1)
            return jax.lax.dynamic_update_index_in_dim(buf, p, k, 0)

        buf = jax.lax.pcast(jnp.zeros((n, t.shape[0], chunk), t.dtype), ('X', 'Y'), to='varying')
        buf = jax.lax.fori_loop(0, n, mk, buf)

        def part(block):
            return jax.lax.dynamic_index_in_dim(buf, block, 0, keepdims=False)

        acc = part((idx + 1) % n)
        for s in range(1, n):             # the ring, unrolled: it only adds
            acc = jax.lax.ppermute(acc, 'Y', [(j, (j - 1) % n) for j in range(n)])
            acc = acc + part((idx + s + 1) % n)
        return acc

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P('Y', None)),
                         out_specs=P('X', 'Y'))(T, W2)
