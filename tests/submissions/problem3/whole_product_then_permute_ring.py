"""allreduce_matmul that makes the whole partial product of the ring's columns first (two dots over
halves of the local contracting dimension), then all-reduces it with a one-way ring of
collective-permutes (a reduce-scatter ring, then an all-gather ring) that has no matmul left to
overlap; columns past the last multiple of nY get a psum of their own."""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def allreduce_matmul(A, W, *, mesh):
    F = W.shape[1]

    def local(a, w):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        blk = F // n
        Fm = blk * n
        d = a.shape[1]
        h = max(d // 2, 1)
        wm = w[:, :Fm]
        whole = a[:, :h] @ wm[:h] + (a[:, h:] @ wm[h:] if h < d else 0.)
        left = [(j, (j - 1) % n) for j in range(n)]

        def part(b):
            return jax.lax.dynamic_slice_in_dim(whole, b * blk, blk, axis=1)

        def rs(s, acc):
            return jax.lax.ppermute(acc, 'Y', left) + part((idx + s + 1) % n)

        mine = jax.lax.fori_loop(1, n, rs, part((idx + 1) % n))   # block idx, summed
        out = jnp.zeros((a.shape[0], Fm), a.dtype)
        out = jax.lax.dynamic_update_slice_in_dim(out, mine, idx * blk, axis=1)

        def ag(s, carry):
            out, cur = carry
            cur = jax.lax.ppermute(cur, 'Y', left)          # block idx + s
            out = jax.lax.dynamic_update_slice_in_dim(out, cur, ((idx + s) % n) * blk, axis=1)
            return out, cur

        out, _ = jax.lax.fori_loop(1, n, ag, (out, mine))
        if Fm < F:
            out = jnp.concatenate([out, jax.lax.psum(a @ w[:, Fm:], 'Y')], axis=1)
        return out

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P('Y', None)),
                         out_specs=P('X', None), check_vma=False)(A, W)
