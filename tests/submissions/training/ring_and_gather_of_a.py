"""Red team: allgather_matmul_grads that moves A's blocks twice, a ring for half of dW and an
all-gather of A's block for the rest (a decoy ring beside the gather). Right values; 3(nY-1) blocks
over Y where 2(nY-1) are needed."""

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def allgather_matmul_grads(A, W, dOut, *, mesh):
    def local(a, w, g):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        chunk = a.shape[1]
        back = [(j, (j - 1) % n) for j in range(n)]

        def term(block):
            return g @ jax.lax.dynamic_slice_in_dim(w, block * chunk, chunk, axis=0).T

        def step(s, acc):
            return jax.lax.ppermute(acc, 'Y', back) + term((idx + s + 1) % n)

        dA = jax.lax.fori_loop(1, n, step, term((idx + 1) % n))

        def decoy(s, b):
            return jax.lax.ppermute(b, 'Y', back)

        moved = jax.lax.fori_loop(0, n - 1, decoy, a)
        row = jax.lax.all_gather(a, 'Y', axis=1, tiled=True)
        return dA + 0.0 * jnp.sum(moved), jax.lax.psum(row.T @ g, 'X')

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P(None, 'Y'), P('X', 'Y')),
                         out_specs=(P('X', 'Y'), P(None, 'Y')))(A, W, dOut)
