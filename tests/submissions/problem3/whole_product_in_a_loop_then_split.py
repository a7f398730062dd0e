"""allreduce_matmul that makes the whole [B/nX, F] partial product first, in a fori_loop of its own
over the local contracting dimension (one rank-1 product per run, no communication), then
psums its two halves of F: two pieces, but both wait for the whole loop, so no reduction
overlaps a matmul."""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def allreduce_matmul(A, W, *, mesh):
    F = W.shape[1]

    def local(a, w):
        d = a.shape[1]

        def acc_step(k, acc):
            return acc + jax.lax.dynamic_slice_in_dim(a, k, 1, axis=1) @ jax.lax.dynamic_slice_in_dim(w, k, 1, axis=0)

        acc = jax.lax.pcast(jnp.zeros((a.shape[0], F), a.dtype), ('X', 'Y'), to='varying')
        whole = jax.lax.fori_loop(0, d, acc_step, acc)
        h = F // 2
        return jnp.concatenate([jax.lax.psum(whole[:, :h], 'Y'), jax.lax.psum(whole[:, h:], 'Y')], axis=1)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P('Y', None)),
                         out_specs=P('X', None))(A, W)
