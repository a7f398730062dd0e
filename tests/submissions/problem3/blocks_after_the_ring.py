"""allgather_matmul (and transformer_block) that runs the whole ring of nY-1 neighbour permutes
first, only gathering A into a [B/nX, D] buffer, and then, after the ring, does the matmul as nY
separate block products in a second loop with no communication: each dot is one block's size,
but none overlaps a permute."""

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


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

        def mm(k, acc):   # after the ring: block k of the gathered A times its rows of w
            ak = jax.lax.dynamic_slice_in_dim(full, k * chunk, chunk, axis=1)
            wk = jax.lax.dynamic_slice_in_dim(w, k * chunk, chunk, axis=0)
            return acc + ak @ wk

        acc = jax.lax.pcast(jnp.zeros((a.shape[0], w.shape[1]), a.dtype), ('X', 'Y'), to='varying')
        return jax.lax.fori_loop(0, n, mm, acc)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P(None, 'Y')),
                         out_specs=P('X', 'Y'))(A, W)


def reducescatter_matmul(T, W2, *, mesh):
    """Blocks of the partial product all made before the ring (one dot per block), then a ring
    that only adds."""
    def local(t, w2):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        chunk = w2.shape[1] // n

        def mk(k, buf):
            p = t @ jax.lax.dynamic_slice_in_dim(w2, k * chunk, chunk, axis=1)
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
