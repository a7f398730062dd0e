"""allreduce_matmul_bidirectional balanced over the whole program but one-way in each phase: the
reduce-scatter sends both halves left, the all-gather both halves right. As many bytes go each
way in all, yet every step of both phases loads one direction of the links only."""
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

        def reduce_step(s, accs):        # both halves left
            lo, hi = accs
            b = (idx + s + 1) % n
            return (jax.lax.ppermute(lo, 'Y', left) + partial(b, 0),
                    jax.lax.ppermute(hi, 'Y', left) + partial(b, 1))

        lo, hi = jax.lax.fori_loop(1, n, reduce_step, (partial((idx + 1) % n, 0), partial((idx + 1) % n, 1)))
        out = jnp.zeros((a.shape[0], w.shape[1]), a.dtype)
        out = jax.lax.dynamic_update_slice_in_dim(out, jnp.concatenate([lo, hi], axis=1), idx * block, axis=1)

        def gather_step(s, carry):       # both halves right
            out, lo, hi = carry
            lo = jax.lax.ppermute(lo, 'Y', right)
            hi = jax.lax.ppermute(hi, 'Y', right)
            out = jax.lax.dynamic_update_slice_in_dim(out, jnp.concatenate([lo, hi], axis=1),
                                                      ((idx - s) % n) * block, axis=1)
            return out, lo, hi

        out, _, _ = jax.lax.fori_loop(1, n, gather_step, (out, lo, hi))
        return out

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P('Y', None)),
                         out_specs=P('X', None), check_vma=False)(A, W)
