"""Rings both ways that only move data, with every product made apart from them by rank-1
updates (a fori_loop of one column times one row per run): reducescatter and allreduce make
the whole partial product before their rings, allgather after its rings. The permutes are
right in number, size and direction both ways, but no matmul runs beside them. Where the loop
is short XLA unrolls it, and the products sit in straight-line code that runs no collective."""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def _rank1(x, y):
    """x @ y as a loop of rank-1 updates (one column of x times one row of y per run)."""
    def body(k, acc):
        return acc + jax.lax.dynamic_slice_in_dim(x, k, 1, axis=1) * jax.lax.dynamic_slice_in_dim(y, k, 1, axis=0)
    return jax.lax.fori_loop(1, x.shape[1], body, x[:, :1] * y[:1, :])


def _whole(x, y, n, sizes):
    """Every half block of x @ y, made before any ring, in column order."""
    block = sum(sizes)
    return jnp.concatenate([_rank1(x, y[:, b * block + h * sizes[0]: b * block + h * sizes[0] + sizes[h]])
                            for b in range(n) for h in (0, 1) if sizes[h]], axis=1)



def reducescatter_matmul_bidirectional(T, W2, *, mesh):
    def local(t, w2):                     # t: [B/nX, F/nY], w2: [F/nY, D]
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        block = w2.shape[1] // n
        sizes = (block // 2, block - block // 2)   # the two halves; the second wider when odd
        left = [(j, (j - 1) % n) for j in range(n)]
        right = [(j, (j + 1) % n) for j in range(n)]

        whole = _whole(t, w2, n, sizes)

        def partial(b, half):             # this device's share of one half of block b
            start = b * block + half * sizes[0]
            return jax.lax.dynamic_slice_in_dim(whole, start, sizes[half], axis=1)

        def step(s, accs):
            lo, hi = accs                 # first halves travel left, second halves right
            lo = jax.lax.ppermute(lo, 'Y', left) + partial((idx + s + 1) % n, 0)
            hi = jax.lax.ppermute(hi, 'Y', right) + partial((idx - s - 1) % n, 1)
            return lo, hi

        lo, hi = jax.lax.fori_loop(1, n, step, (partial((idx + 1) % n, 0), partial((idx - 1) % n, 1)))
        return jnp.concatenate([lo, hi], axis=1)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P('Y', None)),
                         out_specs=P('X', 'Y'))(T, W2)


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

        whole = _whole(a, w, n, sizes)

        def partial(b, half):
            return jax.lax.dynamic_slice_in_dim(whole, start(b, half), sizes[half], axis=1)

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


def allgather_matmul_bidirectional(A, W, *, mesh):
    def local(a, w):                      # a: [B/nX, D/nY], w: [D, F/nY]
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        chunk = a.shape[1]
        sizes = (chunk // 2, chunk - chunk // 2)
        left = [(j, (j - 1) % n) for j in range(n)]
        right = [(j, (j + 1) % n) for j in range(n)]
        full = jnp.zeros((a.shape[0], chunk * n), a.dtype)
        full = jax.lax.dynamic_update_slice_in_dim(full, a, idx * chunk, axis=1)

        def step(s, carry):               # the rings only move data
            full, lo, hi = carry
            lo = jax.lax.ppermute(lo, 'Y', left)     # first half of chunk idx + s
            hi = jax.lax.ppermute(hi, 'Y', right)    # second half of chunk idx - s
            full = jax.lax.dynamic_update_slice_in_dim(full, lo, ((idx + s) % n) * chunk, axis=1)
            full = jax.lax.dynamic_update_slice_in_dim(full, hi, ((idx - s) % n) * chunk + sizes[0], axis=1)
            return full, lo, hi

        full, _, _ = jax.lax.fori_loop(1, n, step, (full, a[:, :sizes[0]], a[:, sizes[0]:]))
        return _rank1(full, w)            # the whole product, after the rings

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P(None, 'Y')),
                         out_specs=P('X', 'Y'))(A, W)
