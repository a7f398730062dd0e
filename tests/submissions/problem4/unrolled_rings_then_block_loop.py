"""Bidirectional rings unrolled in Python that carry data only: reducescatter_matmul_bidirectional
makes every half-block of its partial product in a compute-only fori_loop before the rings, which
then only add; allgather_matmul_bidirectional runs both half-block rings to the end first, then
multiplies block by block in a compute-only fori_loop. No product runs beside a permute."""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

RIGHT = lambda n: [(j, (j + 1) % n) for j in range(n)]  # noqa: E731
LEFT = lambda n: [(j, (j - 1) % n) for j in range(n)]  # noqa: E731


def _halves(block):
    return (block - block // 2, block // 2)


def _reduce_scatter(x, w, n, idx):
    block = w.shape[1] // n
    sizes = _halves(block)

    def mk(h):
        def body(b, buf):
            p = x @ jax.lax.dynamic_slice_in_dim(w, b * block + h * sizes[0], sizes[h], axis=1)
            return jax.lax.dynamic_update_index_in_dim(buf, p, b, 0)
        buf = jnp.zeros((n, x.shape[0], sizes[h]), x.dtype)
        return jax.lax.fori_loop(0, n, body, buf)

    bufs = (mk(0), mk(1))                 # every partial half-block, before the rings

    def partial(b, h):
        return jax.lax.dynamic_index_in_dim(bufs[h], b, 0, keepdims=False)

    first = partial((idx - 1) % n, 0)
    second = partial((idx + 1) % n, 1)
    for s in range(1, n):                 # the rings only add
        first = jax.lax.ppermute(first, 'Y', RIGHT(n)) + partial((idx - s - 1) % n, 0)
        second = jax.lax.ppermute(second, 'Y', LEFT(n)) + partial((idx + s + 1) % n, 1)
    return first, second


def reducescatter_matmul_bidirectional(T, W2, *, mesh):
    def local(t, w2):
        n, idx = jax.lax.axis_size('Y'), jax.lax.axis_index('Y')
        return jnp.concatenate(_reduce_scatter(t, w2, n, idx), axis=1)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P('Y', None)),
                         out_specs=P('X', 'Y'), check_vma=False)(T, W2)


def allreduce_matmul_bidirectional(A, W, *, mesh):
    def local(a, w):
        n, idx = jax.lax.axis_size('Y'), jax.lax.axis_index('Y')
        block = w.shape[1] // n
        sizes = _halves(block)
        first, second = _reduce_scatter(a, w, n, idx)
        pieces = {(0, 0): first, (1, 0): second}
        for s in range(1, n):
            pieces[(0, s)] = jax.lax.ppermute(pieces[(0, s - 1)], 'Y', RIGHT(n))
            pieces[(1, s)] = jax.lax.ppermute(pieces[(1, s - 1)], 'Y', LEFT(n))
        out = jnp.zeros((a.shape[0], w.shape[1]), a.dtype)
        for (h, s), piece in pieces.items():
            b = (idx - s) % n if h == 0 else (idx + s) % n
            out = jax.lax.dynamic_update_slice_in_dim(out, piece, b * block + h * sizes[0], axis=1)
        return out

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P('Y', None)),
                         out_specs=P('X', None), check_vma=False)(A, W)


def allgather_matmul_bidirectional(A, W, *, mesh):
    def local(a, w):
        n, idx = jax.lax.axis_size('Y'), jax.lax.axis_index('Y')
        chunk = a.shape[1]
        sizes = _halves(chunk)
        first, second = a[:, :sizes[0]], a[:, sizes[0]:]
        firsts, seconds = [first], [second]
        for s in range(1, n):             # both rings, to the end: data only
            first = jax.lax.ppermute(first, 'Y', RIGHT(n))
            second = jax.lax.ppermute(second, 'Y', LEFT(n))
            firsts.append(first)
            seconds.append(second)
        F1, F2 = jnp.stack(firsts), jnp.stack(seconds)

        def mm(s, acc):                   # after the rings: one block's product per iteration
            w1 = jax.lax.dynamic_slice_in_dim(w, ((idx - s) % n) * chunk, sizes[0], axis=0)
            w2 = jax.lax.dynamic_slice_in_dim(w, ((idx + s) % n) * chunk + sizes[0], sizes[1], axis=0)
            return (acc + jax.lax.dynamic_index_in_dim(F1, s, 0, keepdims=False) @ w1
                    + jax.lax.dynamic_index_in_dim(F2, s, 0, keepdims=False) @ w2)

        acc = jnp.zeros((a.shape[0], w.shape[1]), a.dtype)
        return jax.lax.fori_loop(0, n, mm, acc)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P(None, 'Y')),
                         out_specs=P('X', 'Y'), check_vma=False)(A, W)
