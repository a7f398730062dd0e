"""Red team, found honest. allgather_matmul_grads on W005's allowance of two block products per
permute: dA's whole product g @ w.T is made before its ring, which only passes slices of it on, and
dW's block products (A gathered) are made inside dA's ring, one per step. Every permute still has a
block product beside it that does not depend on it, so the link time is hidden as in the contract's
design, only behind dW's products instead of dA's own: W005 measures overlap, and passes it.
fsdp_train_step that gathers the weights before shard_map by jax.device_put to a replicated
sharding, hoping the gather escapes the graded program: the kit compiles the whole function, so the
device_put is the program's all-gather of each stored weight, once, and the step is FSDP within the
bound. Full marks."""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def allgather_matmul_grads(A, W, dOut, *, mesh):
    def local(a, w, g):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        k = a.shape[1]
        whole = g @ w.T                                           # every block's dA term at once
        row = jax.lax.all_gather(a, 'Y', axis=1, tiled=True)      # A[x, :]

        def term(block):
            return jax.lax.dynamic_slice_in_dim(whole, block * k, k, axis=1)

        def dw_block(block):                                      # rows `block` of dW, this X row's share
            return jax.lax.dynamic_slice_in_dim(row, block * k, k, axis=1).T @ g

        def step(s, carry):
            acc, dw = carry
            acc = jax.lax.ppermute(acc, 'Y', [(j, (j - 1) % n) for j in range(n)]) + term((idx + s + 1) % n)
            dw = jax.lax.dynamic_update_slice_in_dim(dw, dw_block(s), s * k, axis=0)
            return acc, dw

        dw = jax.lax.dynamic_update_slice_in_dim(jnp.zeros((row.shape[1], g.shape[1]), g.dtype),
                                                 dw_block(n - 1), (n - 1) * k, axis=0)
        dA, dw = jax.lax.fori_loop(1, n, step, (term((idx + 1) % n), dw))
        dw = jax.lax.dynamic_update_slice_in_dim(dw, dw_block(0), 0, axis=0)
        return dA, jax.lax.psum(dw, 'X')

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P(None, 'Y'), P('X', 'Y')),
                         out_specs=(P('X', 'Y'), P(None, 'Y')))(A, W, dOut)


def fsdp_train_step(W1, W2, x, y, *, mesh, lr):
    B, D = x.shape
    W1f = jax.device_put(W1, NamedSharding(mesh, P()))
    W2f = jax.device_put(W2, NamedSharding(mesh, P()))

    def local(w1, w2, W1, W2, xb, yb):
        def loss(W1, W2):
            return jnp.sum((jax.nn.gelu(xb @ W1) @ W2 - yb) ** 2) / (B * D)

        G1, G2 = jax.grad(loss, argnums=(0, 1))(jax.lax.pcast(W1, 'X', to='varying'), jax.lax.pcast(W2, 'X', to='varying'))
        g1 = jax.lax.psum_scatter(G1, 'X', scatter_dimension=0, tiled=True)
        g2 = jax.lax.psum_scatter(G2, 'X', scatter_dimension=0, tiled=True)
        return w1 - lr * g1, w2 - lr * g2

    spec = P('X', None)
    return jax.shard_map(local, mesh=mesh, in_specs=(spec, spec, P(), P(), spec, spec),
                         out_specs=(spec, spec))(W1, W2, W1f, W2f, x, y)
