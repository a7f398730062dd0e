"""check_vma=False and rematerialization, honest designs. allgather_matmul_grads as jax.vjp of the
forward ring inside shard_map with check_vma=False: JAX no longer knows W is the same on every X
row, so the cotangent of w is each row's own partial dW, and the student sums it over X by one psum.
fsdp_train_step with jax.value_and_grad inside shard_map with check_vma=False (the loss dropped):
the transpose of all_gather is psum_scatter either way. fsdp_train_step_jit with the loss under
jax.checkpoint: the rematerialized step sends what the plain one does. Full marks."""

import functools

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def allgather_matmul_grads(A, W, dOut, *, mesh):
    def forward(a, w):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        chunk = a.shape[1]

        def step(i, carry):
            acc, a = carry
            acc = acc + a @ jax.lax.dynamic_slice_in_dim(w, ((idx + i) % n) * chunk, chunk, axis=0)
            return acc, jax.lax.ppermute(a, 'Y', [(j, (j - 1) % n) for j in range(n)])

        acc, a = jax.lax.fori_loop(0, n - 1, step, (jnp.zeros((a.shape[0], w.shape[1]), a.dtype), a))
        return acc + a @ jax.lax.dynamic_slice_in_dim(w, ((idx + n - 1) % n) * chunk, chunk, axis=0)

    def local(a, w, g):
        _, pullback = jax.vjp(forward, a, w)
        da, dw = pullback(g)
        return da, jax.lax.psum(dw, 'X')

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P(None, 'Y'), P('X', 'Y')),
                         out_specs=(P('X', 'Y'), P(None, 'Y')), check_vma=False)(A, W, dOut)


def fsdp_train_step(W1, W2, x, y, *, mesh, lr):
    B, D = x.shape

    def local(w1, w2, xb, yb):
        def loss(params):
            W1 = jax.lax.all_gather(params[0], 'X', axis=0, tiled=True)
            W2 = jax.lax.all_gather(params[1], 'X', axis=0, tiled=True)
            return jnp.sum((jax.nn.gelu(xb @ W1) @ W2 - yb) ** 2) / (B * D)

        _, (g1, g2) = jax.value_and_grad(loss)((w1, w2))
        return jax.tree.map(lambda p, g: p - lr * g, (w1, w2), (g1, g2))

    spec = P('X', None)
    return jax.shard_map(local, mesh=mesh, in_specs=(spec,) * 4, out_specs=(spec, spec),
                         check_vma=False)(W1, W2, x, y)


def fsdp_train_step_jit(W1, W2, x, y, *, mesh, lr):
    whole, owner = NamedSharding(mesh, P()), NamedSharding(mesh, P('X', None))

    @jax.checkpoint
    def loss(W1, W2, x, y):
        h = jax.nn.gelu(x @ jax.lax.with_sharding_constraint(W1, whole))
        return jnp.mean((h @ jax.lax.with_sharding_constraint(W2, whole) - y) ** 2)

    @functools.partial(jax.jit, out_shardings=(owner, owner))
    def step(W1, W2, x, y):
        g1, g2 = jax.grad(loss, argnums=(0, 1))(W1, W2, x, y)
        g1 = jax.lax.with_sharding_constraint(g1, owner)
        g2 = jax.lax.with_sharding_constraint(g2, owner)
        return W1 - lr * g1, W2 - lr * g2

    return step(W1, W2, x, y)
