"""allreduce_matmul_bidirectional whose reduce-scatter goes both ways but whose all-gather sends
both halves left at every step: right values and 4(nY-1) half-block permutes, yet the left-going
links carry 3(nY-1) halves and the right-going nY-1, so the all-gather runs at one-way speed."""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def allreduce_matmul_bidirectional(A, W, *, mesh):
    def local(a, w):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        block = w.shape[1] // n
        sizes = (block // 2, block - block // 2)
        left = [(j, (j - 1) % n) for j in range(n)]
        right = [(j, (j + 1) % n) for j in range(n)]

        def partial(b, which):
            return a @ jax.lax.dynamic_slice_in_dim(w, b * block + which * sizes[0], sizes[which], axis=1)

        def reduce_step(s, accs):
            lo, hi = accs
            lo = jax.lax.ppermute(lo, 'Y', left) + partial((idx + s + 1) % n, 0)
            hi = jax.lax.ppermute(hi, 'Y', right) + partial((idx - s - 1) % n, 1)
            return lo, hi

        lo, hi = jax.lax.fori_loop(1, n, reduce_step, (partial((idx + 1) % n, 0), partial((idx - 1) % n, 1)))
        out = jnp.zeros((a.shape[0], w.shape[1]), a.dtype)
        out = jax.lax.dynamic_update_slice_in_dim(out, lo, idx * block, axis=1)
        out = jax.lax.dynamic_update_slice_in_dim(out, hi, idx * block + sizes[0], axis=1)

        def gather_step(s, carry):       # the mistake: both halves go left
            out, lo, hi = carry
            lo = jax.lax.ppermute(lo, 'Y', left)
            hi = jax.lax.ppermute(hi, 'Y', left)
            b = (idx + s) % n
            out = jax.lax.dynamic_update_slice_in_dim(out, lo, b * block, axis=1)
            out = jax.lax.dynamic_update_slice_in_dim(out, hi, b * block + sizes[0], axis=1)
            return out, lo, hi

        out, _, _ = jax.lax.fori_loop(1, n, gather_step, (out, lo, hi))
        return out

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P('Y', None)),
                         out_specs=P('X', None), check_vma=False)(A, W)
