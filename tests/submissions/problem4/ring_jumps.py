"""The three bidirectional parts with one half on a real -1 ring and the other moved by jumps
(+2 on a ring of 4 or 5, +3 and +4 on a ring of 8) chosen so that it still reaches every
device: the same count and sizes as a ring each way, but a jump crosses several links at once."""
import jax, jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def _jumps(n):
    allowed = sorted(range(1, n // 2 + 1), reverse=True) if n > 1 else []
    def dfs(seq, seen, pos):
        if len(seq) == n - 1:
            return seq
        for k in allowed:
            q = (pos + k) % n
            if q != 0 and q not in seen:
                r = dfs(seq + [k], seen | {q}, q)
                if r is not None:
                    return r
        return None
    return dfs([], set(), 0)


def _shift(k, n):
    return [(j, (j + k) % n) for j in range(n)]


def allgather_matmul_bidirectional(A, W, *, mesh):
    def local(a, w):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        chunk = a.shape[1]
        sizes = (chunk // 2, chunk - chunk // 2)

        def w_rows(b, half):
            return jax.lax.dynamic_slice_in_dim(w, b * chunk + half * sizes[0], sizes[half], axis=0)

        lo, hi = a[:, :sizes[0]], a[:, sizes[0]:]
        acc = lo @ w_rows(idx, 0) + hi @ w_rows(idx, 1)
        pos = 0
        for s, k in enumerate(_jumps(n), start=1):
            lo = jax.lax.ppermute(lo, 'Y', _shift(-1, n))
            hi = jax.lax.ppermute(hi, 'Y', _shift(k, n))
            pos += k
            acc = acc + lo @ w_rows((idx + s) % n, 0) + hi @ w_rows((idx - pos) % n, 1)
        return acc

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P(None, 'Y')),
                         out_specs=P('X', 'Y'))(A, W)


def _rs_halves(t, w, n, idx, block):
    """Bidirectional reduce-scatter of t @ w (w's columns in n blocks): lo on the -1 ring,
    hi by jumps. Returns (lo, hi) halves of block idx, fully summed."""
    sizes = (block // 2, block - block // 2)

    def partial(b, half):
        return t @ jax.lax.dynamic_slice_in_dim(w, b * block + half * sizes[0], sizes[half], axis=1)

    ks = _jumps(n)
    total = sum(ks)
    lo = partial((idx + 1) % n, 0) if n > 1 else partial(idx, 0)
    hi = partial((idx + total) % n, 1)
    pos = 0
    for s, k in enumerate(ks, start=1):
        lo = jax.lax.ppermute(lo, 'Y', _shift(-1, n)) + partial((idx + s + 1) % n, 0)
        pos += k
        hi = jax.lax.ppermute(hi, 'Y', _shift(k, n)) + partial((idx + total - pos) % n, 1)
    return lo, hi, sizes


def reducescatter_matmul_bidirectional(T, W2, *, mesh):
    def local(t, w2):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        lo, hi, _ = _rs_halves(t, w2, n, idx, w2.shape[1] // n)
        return jnp.concatenate([lo, hi], axis=1)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P('Y', None)),
                         out_specs=P('X', 'Y'))(T, W2)


def allreduce_matmul_bidirectional(A, W, *, mesh):
    def local(a, w):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        block = w.shape[1] // n
        lo, hi, sizes = _rs_halves(a, w, n, idx, block)

        def start(b, half):
            return b * block + half * sizes[0]

        out = jnp.zeros((a.shape[0], w.shape[1]), a.dtype)
        out = jax.lax.dynamic_update_slice_in_dim(out, lo, start(idx, 0), axis=1)
        out = jax.lax.dynamic_update_slice_in_dim(out, hi, start(idx, 1), axis=1)
        pos = 0
        for s, k in enumerate(_jumps(n), start=1):
            lo = jax.lax.ppermute(lo, 'Y', _shift(-1, n))     # first half of block idx+s
            hi = jax.lax.ppermute(hi, 'Y', _shift(k, n))      # second half of block idx-pos
            pos += k
            out = jax.lax.dynamic_update_slice_in_dim(out, lo, start((idx + s) % n, 0), axis=1)
            out = jax.lax.dynamic_update_slice_in_dim(out, hi, start((idx - pos) % n, 1), axis=1)
        return out

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P('Y', None)),
                         out_specs=P('X', None), check_vma=False)(A, W)
