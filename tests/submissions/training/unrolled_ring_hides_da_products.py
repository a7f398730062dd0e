"""Red team on W005's measure: both rings unrolled in Python, dW's by A's blocks and dA's passing
slices of the whole g @ w.T made before it. The whole product depends on no permute, and A's
permutes depend on no product, so in the unrolled program the product can run beside A's ring, and
each of dW's block products beside one of dA's permutes: every link is busy while something
multiplies, as in the contract's design. Found honest (W005 measures overlap): full marks. The same
slices passed round a fori_loop (products_before_the_ring) overlap nothing and lose W005."""

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def allgather_matmul_grads(A, W, dOut, *, mesh):
    def local(a, w, g):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        k = a.shape[1]
        back = [(j, (j - 1) % n) for j in range(n)]
        whole = g @ w.T

        def term(block):
            return jax.lax.dynamic_slice_in_dim(whole, block * k, k, axis=1)

        dA = term((idx + 1) % n)
        dw = jnp.zeros((w.shape[0], w.shape[1]), w.dtype)
        for s in range(n):
            dw = jax.lax.dynamic_update_slice_in_dim(dw, a.T @ g, ((idx + s) % n) * k, axis=0)
            if s < n - 1:
                a = jax.lax.ppermute(a, 'Y', back)
                dA = jax.lax.ppermute(dA, 'Y', back) + term((idx + s + 2) % n)
        return dA, jax.lax.psum(dw, 'X')

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P(None, 'Y'), P('X', 'Y')),
                         out_specs=(P('X', 'Y'), P(None, 'Y')))(A, W, dOut)
