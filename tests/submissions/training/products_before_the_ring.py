"""allgather_matmul_grads whose dA ring only moves data: the whole [B/nX, D] product g @ w.T is made
before the ring, which then passes slices of it on. Right values, right bytes, but no product
runs beside a permute. dW gathers A (allowed)."""

import jax
from jax.sharding import PartitionSpec as P


def allgather_matmul_grads(A, W, dOut, *, mesh):
    def local(a, w, g):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        chunk = a.shape[1]
        whole = g @ w.T                                           # every block's term at once

        def term(block):
            return jax.lax.dynamic_slice_in_dim(whole, block * chunk, chunk, axis=1)

        def step(s, acc):
            return jax.lax.ppermute(acc, 'Y', [(j, (j - 1) % n) for j in range(n)]) + term((idx + s + 1) % n)

        dA = jax.lax.fori_loop(1, n, step, term((idx + 1) % n))
        row = jax.lax.all_gather(a, 'Y', axis=1, tiled=True)
        return dA, jax.lax.psum(row.T @ g, 'X')

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P(None, 'Y'), P('X', 'Y')),
                         out_specs=(P('X', 'Y'), P(None, 'Y')))(A, W, dOut)
