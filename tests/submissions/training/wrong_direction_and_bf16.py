"""Mistakes that only the values show. allgather_matmul_grads whose dA ring sends the partial sums to
j+1 but keeps the solution's schedule of blocks (written for sums that go to j-1): every device adds
its term to the wrong block, so dA is off by whole blocks wherever nY > 2 (on a ring of 2 both ways
are one). fsdp_train_step that gathers the weights in bfloat16 (mixed-precision FSDP, half the bytes
of each gather): the gradient carries bfloat16's rounding, which the contract's float32 tolerance
refuses on every case."""

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def allgather_matmul_grads(A, W, dOut, *, mesh):
    def local(a, w, g):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        chunk = a.shape[1]

        def term(block):
            return g @ jax.lax.dynamic_slice_in_dim(w, block * chunk, chunk, axis=0).T

        def step(s, acc):
            return jax.lax.ppermute(acc, 'Y', [(j, (j + 1) % n) for j in range(n)]) + term((idx + s + 1) % n)

        dA = jax.lax.fori_loop(1, n, step, term((idx + 1) % n))
        row = jax.lax.all_gather(a, 'Y', axis=1, tiled=True)
        return dA, jax.lax.psum(row.T @ g, 'X')

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P(None, 'Y'), P('X', 'Y')),
                         out_specs=(P('X', 'Y'), P(None, 'Y')))(A, W, dOut)


def fsdp_train_step(W1, W2, x, y, *, mesh, lr):
    B, D = x.shape

    def local(w1, w2, xb, yb):
        def loss(w1, w2):
            W1 = jax.lax.all_gather(w1.astype(jnp.bfloat16), 'X', axis=0, tiled=True).astype(jnp.float32)
            W2 = jax.lax.all_gather(w2.astype(jnp.bfloat16), 'X', axis=0, tiled=True).astype(jnp.float32)
            return jnp.sum((jax.nn.gelu(xb @ W1) @ W2 - yb) ** 2) / (B * D)

        g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2)
        return w1 - lr * g1, w2 - lr * g2

    spec = P('X', None)
    return jax.shard_map(local, mesh=mesh, in_specs=(spec,) * 4, out_specs=(spec, spec))(W1, W2, x, y)
