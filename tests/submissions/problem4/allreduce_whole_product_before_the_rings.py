"""allreduce_matmul_bidirectional that computes the whole [B/nX, F] partial product in one matmul
before either ring starts, then reduce-scatters and all-gathers slices of it both ways: the
rings and their halves right, with no matmul left for the reduce-scatter ring to overlap."""
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
        whole = a @ w

        def start(b, half):
            return b * block + half * sizes[0]

        def partial(b, half):
            return jax.lax.dynamic_slice_in_dim(whole, start(b, half), sizes[half], axis=1)

        def reduce_step(s, accs):
            lo, hi = accs
            lo = jax.lax.ppermute(lo, 'Y', left) + partial((idx + s + 1) % n, 0)
            hi = jax.lax.ppermute(hi, 'Y', right) + partial((idx - s - 1) % n, 1)
            return lo, hi

        lo, hi = jax.lax.fori_loop(1, n, reduce_step, (partial((idx + 1) % n, 0), partial((idx - 1) % n, 1)))
        out = jnp.zeros((a.shape[0], w.shape[1]), a.dtype)
        out = jax.lax.dynamic_update_slice_in_dim(out, lo, start(idx, 0), axis=1)
        out = jax.lax.dynamic_update_slice_in_dim(out, hi, start(idx, 1), axis=1)

        def gather_step(s, carry):
            out, lo, hi = carry
            lo = jax.lax.ppermute(lo, 'Y', left)
            hi = jax.lax.ppermute(hi, 'Y', right)
            out = jax.lax.dynamic_update_slice_in_dim(out, lo, start((idx + s) % n, 0), axis=1)
            out = jax.lax.dynamic_update_slice_in_dim(out, hi, start((idx - s) % n, 1), axis=1)
            return out, lo, hi

        out, _, _ = jax.lax.fori_loop(1, n, gather_step, (out, lo, hi))
        return out

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P('Y', None)),
                         out_specs=P('X', None), check_vma=False)(A, W)
