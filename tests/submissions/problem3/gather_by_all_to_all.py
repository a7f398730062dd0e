"""allreduce_matmul whose pieces are each multiplied on their own and reduced by an all_to_all (a
scatter, then a local sum), then gathered back by a second all_to_all of a broadcast copy of
the summed block: every block it sends is the same value, an all-gather spelled as an
all-to-all. Columns past a multiple of nY are psum'd."""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def allreduce_matmul(A, W, *, mesh):
    F = W.shape[1]

    def local(a, w):
        n = jax.lax.axis_size('Y')
        b = a.shape[0]
        k = F // n                          # blocks of n columns
        groups = [k // 2, k - k // 2] if k >= 2 else [k]
        outs, lo = [], 0
        for g in groups:
            hi = lo + g * n
            p = a @ w[:, lo:hi]             # [b, g*n], this piece only
            x = p.reshape(b, n, g).transpose(1, 0, 2)                       # [n, b, g]
            y = jax.lax.all_to_all(x, 'Y', 0, 0, tiled=True)                # chunk idx from each device
            s = y.sum(0)                                                    # [b, g] block idx, summed
            z = jnp.broadcast_to(s[None], (n, b, g))
            gathered = jax.lax.all_to_all(z, 'Y', 0, 0, tiled=True)         # every device's block
            outs.append(gathered.transpose(1, 0, 2).reshape(b, g * n))
            lo = hi
        if lo < F:
            outs.append(jax.lax.psum(a @ w[:, lo:], 'Y'))
        return jnp.concatenate(outs, axis=1)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P('Y', None)),
                         out_specs=P('X', None), check_vma=False)(A, W)
