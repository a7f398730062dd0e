"""A right answer to all three bidirectional parts written with lax.cond: the first step's
permutes inside a cond, an all-gather phase whose last step a cond skips, halves split along
rows, directions that depend on the ring's parity. Both halves of a step are in the same
branch, so every pass that runs them sends as much each way: full marks."""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def _perms(n):
    return [(j, (j - 1) % n) for j in range(n)], [(j, (j + 1) % n) for j in range(n)]


def reducescatter_matmul_bidirectional(T, W2, *, mesh):
    def local(t, w2):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        blk = w2.shape[1] // n
        sz = (blk // 2, blk - blk // 2)
        left, right = _perms(n)

        def partial(b, h):
            return t @ jax.lax.dynamic_slice_in_dim(w2, b * blk + h * sz[0], sz[h], axis=1)

        def step(s, accs):
            lo, hi = accs
            lo, hi = jax.lax.cond(s > 0,
                                  lambda x: (jax.lax.ppermute(x[0], 'Y', left), jax.lax.ppermute(x[1], 'Y', right)),
                                  lambda x: x, (lo, hi))
            return lo + partial((idx + s + 1) % n, 0), hi + partial((idx - s - 1) % n, 1)

        z = lambda k: jax.lax.pcast(jnp.zeros((t.shape[0], k), t.dtype), ('X', 'Y'), to='varying')
        lo, hi = jax.lax.fori_loop(0, n, step, (z(sz[0]), z(sz[1])))
        return jnp.concatenate([lo, hi], axis=1)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P('Y', None)),
                         out_specs=P('X', 'Y'))(T, W2)


def allreduce_matmul_bidirectional(A, W, *, mesh):
    """Halves split along the rows (B/nX), directions chosen by ring parity, the all-gather
    phase a loop of n steps whose last one is skipped with lax.cond."""
    def local(a, w):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        blk = w.shape[1] // n
        r = a.shape[0]
        rs = (r // 2, r - r // 2)
        left, right = _perms(n)
        up, down = (left, right) if n % 2 == 0 else (right, left)
        sgn = -1 if n % 2 == 0 else 1       # up moves block index by +1 per step when sgn=-1 ... see below
        a0, a1 = a[:rs[0]], a[rs[0]:]

        def cols(b):
            return jax.lax.dynamic_slice_in_dim(w, b * blk, blk, axis=1)

        # 'up' perm: device j sends to j + d_up; receiving device holds from idx - d_up.
        d_up = -1 if up is left else 1
        # reduce-scatter: top rows travel 'up', bottom rows 'down'
        def rstep(s, accs):
            x0, x1 = accs
            x0 = jax.lax.ppermute(x0, 'Y', up) + a0 @ cols((idx - d_up * (s + 2)) % n)
            x1 = jax.lax.ppermute(x1, 'Y', down) + a1 @ cols((idx + d_up * (s + 2)) % n)
            return x0, x1
        x0, x1 = jax.lax.fori_loop(0, n - 1, rstep, (a0 @ cols((idx - d_up) % n), a1 @ cols((idx + d_up) % n)))
        # now x0 is the full top-rows sum of block (idx - d_up*n) % n = idx, x1 likewise block idx
        out = jnp.zeros((r, w.shape[1]), a.dtype)

        def gstep(s, carry):
            out, x0, x1 = carry
            out = jax.lax.dynamic_update_slice(out, x0, (0, ((idx - d_up * s) % n) * blk))
            out = jax.lax.dynamic_update_slice(out, x1, (rs[0], ((idx + d_up * s) % n) * blk))
            x0, x1 = jax.lax.cond(s < n - 1,
                                  lambda y: (jax.lax.ppermute(y[0], 'Y', up), jax.lax.ppermute(y[1], 'Y', down)),
                                  lambda y: y, (x0, x1))
            return out, x0, x1
        out, _, _ = jax.lax.fori_loop(0, n, gstep, (out, x0, x1))
        return out

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P('Y', None)),
                         out_specs=P('X', None), check_vma=False)(A, W)


def allgather_matmul_bidirectional(A, W, *, mesh):
    """Halves of the block split along rows; the ring is unrolled; direction of each half
    swapped on odd rings."""
    def local(a, w):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        c = a.shape[1]
        r = a.shape[0]
        rs = r // 2
        left, right = _perms(n)
        p0, p1, d0 = (left, right, -1) if n % 2 == 0 else (right, left, 1)
        top, bot = a[:rs], a[rs:]
        rows = lambda b: jax.lax.dynamic_slice_in_dim(w, b * c, c, axis=0)
        acc_t = top @ rows(idx)
        acc_b = bot @ rows(idx)
        for s in range(1, n):
            top = jax.lax.ppermute(top, 'Y', p0)      # now holds block idx - d0*s
            bot = jax.lax.ppermute(bot, 'Y', p1)      # now holds block idx + d0*s
            acc_t = acc_t + top @ rows((idx - d0 * s) % n)
            acc_b = acc_b + bot @ rows((idx + d0 * s) % n)
        return jnp.concatenate([acc_t, acc_b], 0)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P(None, 'Y')),
                         out_specs=P('X', 'Y'), check_vma=False)(A, W)
