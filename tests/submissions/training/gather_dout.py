"""allgather_matmul_grads with dA by the ring, but dW from dOut and A both gathered over Y: the
whole [D, F] partial dW made on every device, psummed over X, then sliced. dOut moves (blocks of
the wrong size) and the psum carries nY times dW's share."""

import jax
from jax.sharding import PartitionSpec as P


def allgather_matmul_grads(A, W, dOut, *, mesh):
    def local(a, w, g):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        chunk = a.shape[1]

        def term(block):
            return g @ jax.lax.dynamic_slice_in_dim(w, block * chunk, chunk, axis=0).T

        def step(s, acc):
            return jax.lax.ppermute(acc, 'Y', [(j, (j - 1) % n) for j in range(n)]) + term((idx + s + 1) % n)

        dA = jax.lax.fori_loop(1, n, step, term((idx + 1) % n))
        row = jax.lax.all_gather(a, 'Y', axis=1, tiled=True)     # [B/nX, D]
        grow = jax.lax.all_gather(g, 'Y', axis=1, tiled=True)    # [B/nX, F]: dOut gathered
        whole = jax.lax.psum(row.T @ grow, 'X')                  # [D, F]
        cols = g.shape[1]
        return dA, jax.lax.dynamic_slice_in_dim(whole, idx * cols, cols, axis=1)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P(None, 'Y'), P('X', 'Y')),
                         out_specs=(P('X', 'Y'), P(None, 'Y')))(A, W, dOut)
