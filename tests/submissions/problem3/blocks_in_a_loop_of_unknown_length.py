"""A ring that only moves data, with every block's product (one dot each) in a jax.lax.while_loop
of its own whose bound the compiler cannot know (nY, plus isnan of an element: always nY):
allgather_matmul multiplies the gathered blocks after the ring, reducescatter_matmul makes every
block before it. Counted once, such a loop's dots would look like one block's work."""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def _dyn(n, x):                       # n, as a number the compiler cannot know (x is finite)
    return n + jnp.isnan(x.reshape(-1)[0]).astype(jnp.int32)


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
        stop = _dyn(n, a)

        def body(c):
            k, acc = c
            ak = jax.lax.dynamic_slice_in_dim(full, k * chunk, chunk, axis=1)
            wk = jax.lax.dynamic_slice_in_dim(w, k * chunk, chunk, axis=0)
            return k + 1, acc + ak @ wk

        acc = jax.lax.pcast(jnp.zeros((a.shape[0], w.shape[1]), a.dtype), ('X', 'Y'), to='varying')
        k0 = jax.lax.pcast(jnp.int32(0), ('X', 'Y'), to='varying')
        return jax.lax.while_loop(lambda c: c[0] < stop, body, (k0, acc))[1]

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P(None, 'Y')),
                         out_specs=P('X', 'Y'))(A, W)


def reducescatter_matmul(T, W2, *, mesh):
    def local(t, w2):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        chunk = w2.shape[1] // n
        stop = _dyn(n, t)

        def body(c):
            k, buf = c
            p = t @ jax.lax.dynamic_slice_in_dim(w2, k * chunk, chunk, axis=1)
            return k + 1, jax.lax.dynamic_update_slice_in_dim(buf, p, k * chunk, axis=1)

        buf = jax.lax.pcast(jnp.zeros((t.shape[0], w2.shape[1]), t.dtype), ('X', 'Y'), to='varying')
        k0 = jax.lax.pcast(jnp.int32(0), ('X', 'Y'), to='varying')
        buf = jax.lax.while_loop(lambda c: c[0] < stop, body, (k0, buf))[1]

        def part(block):
            return jax.lax.dynamic_slice_in_dim(buf, block * chunk, chunk, axis=1)

        def step(s, acc):
            acc = jax.lax.ppermute(acc, 'Y', [(j, (j - 1) % n) for j in range(n)])
            return acc + part((idx + s + 1) % n)

        return jax.lax.fori_loop(1, n, step, part((idx + 1) % n))

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P('Y', None)),
                         out_specs=P('X', 'Y'))(T, W2)
