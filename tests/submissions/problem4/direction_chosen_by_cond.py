"""The three bidirectional parts as one-way steps: each pass of the ring's loop sends both halves
of a block the same way, +1 in the first passes and -1 in the rest, a lax.cond on the pass
choosing. Both branches run (on different passes), so both directions are there in all, and
one step holds both branches' permutes; but a pass only ever runs one of them."""
import jax, jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def _shift(k, n):
    return [(j, (j + k) % n) for j in range(n)]


def _ds(x, start, size, axis):
    return jax.lax.dynamic_slice_in_dim(x, start, size, axis=axis)


def _rs_oneway_phases(n, idx, partial):
    """Reduce-scatter: device idx ends with block idx summed over the ring. First k steps a +1
    chain (both halves +1), then m steps a -1 chain (both halves -1). `partial(b, h)`."""
    k = n // 2              # ceil((n-1)/2)
    m = n - 1 - k
    right, left = _shift(1, n), _shift(-1, n)
    P0 = (partial((idx + k) % n, 0), partial((idx + k) % n, 1))
    M0 = (partial((idx - m) % n, 0), partial((idx - m) % n, 1))

    def plus(s, Pc, Mc):
        b = (idx + k - (s + 1)) % n
        Pc = tuple(jax.lax.ppermute(x, 'Y', right) + partial(b, h) for h, x in enumerate(Pc))
        return Pc, Mc

    def minus(s, Pc, Mc):
        t = s - k
        b = (idx - m + t + 1) % n
        keep = (t + 1 < m).astype(Pc[0].dtype)
        Mc = tuple(jax.lax.ppermute(x, 'Y', left) + keep * partial(b, h) for h, x in enumerate(Mc))
        return Pc, Mc

    def step(s, carry):
        Pc, Mc = carry
        return jax.lax.cond(s < k, plus, minus, s, Pc, Mc)

    Pc, Mc = jax.lax.fori_loop(0, n - 1, step, (P0, M0))
    if m == 0:
        return Pc
    return tuple(p + q for p, q in zip(Pc, Mc))


def _ag_oneway_phases(n, idx, lo, hi, use):
    """All-gather: +1 chain for k steps, then -1 chain for m steps; use(acc, b, lo, hi)."""
    k = n // 2
    right, left = _shift(1, n), _shift(-1, n)

    def plus(s, acc, Pc, Mc):
        Pc = tuple(jax.lax.ppermute(x, 'Y', right) for x in Pc)
        return use(acc, (idx - s - 1) % n, *Pc), Pc, Mc

    def minus(s, acc, Pc, Mc):
        Mc = tuple(jax.lax.ppermute(x, 'Y', left) for x in Mc)
        return use(acc, (idx + (s - k) + 1) % n, *Mc), Pc, Mc

    def step(s, carry):
        return jax.lax.cond(s < k, plus, minus, s, *carry)

    return step, (lo, hi), (lo, hi)


def allgather_matmul_bidirectional(A, W, *, mesh):
    def local(a, w):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        chunk = a.shape[1]
        h = chunk // 2

        def use(acc, b, lo, hi):
            return acc + jnp.concatenate([lo, hi], axis=1) @ _ds(w, b * chunk, chunk, 0)

        acc = use(jnp.zeros((a.shape[0], w.shape[1]), a.dtype), idx, a[:, :h], a[:, h:])
        step, Pc, Mc = _ag_oneway_phases(n, idx, a[:, :h], a[:, h:], use)
        acc, _, _ = jax.lax.fori_loop(0, n - 1, step, (acc, Pc, Mc))
        return acc

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P(None, 'Y')),
                         out_specs=P('X', 'Y'))(A, W)


def reducescatter_matmul_bidirectional(T, W2, *, mesh):
    def local(t, w2):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        block = w2.shape[1] // n
        sizes = (block // 2, block - block // 2)

        def partial(b, half):
            return t @ _ds(w2, b * block + half * sizes[0], sizes[half], 1)

        lo, hi = _rs_oneway_phases(n, idx, partial)
        return jnp.concatenate([lo, hi], axis=1)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P('Y', None)),
                         out_specs=P('X', 'Y'))(T, W2)


def allreduce_matmul_bidirectional(A, W, *, mesh):
    def local(a, w):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        block = w.shape[1] // n
        sizes = (block // 2, block - block // 2)

        def partial(b, half):
            return a @ _ds(w, b * block + half * sizes[0], sizes[half], 1)

        lo, hi = _rs_oneway_phases(n, idx, partial)

        def use(out, b, lo, hi):
            return jax.lax.dynamic_update_slice_in_dim(out, jnp.concatenate([lo, hi], 1), b * block, axis=1)

        out = use(jnp.zeros((a.shape[0], w.shape[1]), a.dtype), idx, lo, hi)
        step, Pc, Mc = _ag_oneway_phases(n, idx, lo, hi, use)
        out, _, _ = jax.lax.fori_loop(0, n - 1, step, (out, Pc, Mc))
        return out

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P('Y', None)),
                         out_specs=P('X', None), check_vma=False)(A, W)
