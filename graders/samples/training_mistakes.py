"""A typical first attempt at training: dA summed by a psum over Y then sliced (no ring), the
FSDP step with each device's loss the mean over its own rows (the step nX times too long), and
the jax.jit step done right with out_shardings only."""
import functools

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def allgather_matmul_grads(A, W, dOut, *, mesh):
    def local(a, w, g):                   # a: [B/nX, D/nY], w: [D, F/nY], g: [B/nX, F/nY]
        idx = jax.lax.axis_index('Y')
        chunk = a.shape[1]
        total = jax.lax.psum(g @ w.T, 'Y')                        # every block of dA, on every device
        dA = jax.lax.dynamic_slice_in_dim(total, idx * chunk, chunk, axis=1)
        row = jax.lax.all_gather(a, 'Y', axis=1, tiled=True)     # A[x, :]
        return dA, jax.lax.psum(row.T @ g, 'X')

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P(None, 'Y'), P('X', 'Y')),
                         out_specs=(P('X', 'Y'), P(None, 'Y')))(A, W, dOut)


def fsdp_train_step(W1, W2, x, y, *, mesh, lr):
    def local(w1, w2, xb, yb):
        def loss(w1, w2):
            W1 = jax.lax.all_gather(w1, 'X', axis=0, tiled=True)
            W2 = jax.lax.all_gather(w2, 'X', axis=0, tiled=True)
            return jnp.mean((jax.nn.gelu(xb @ W1) @ W2 - yb) ** 2)   # the mean of this device's rows only

        g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2)
        return w1 - lr * g1, w2 - lr * g2

    spec = P('X', None)
    return jax.shard_map(local, mesh=mesh, in_specs=(spec,) * 4, out_specs=(spec, spec))(W1, W2, x, y)


def fsdp_train_step_jit(W1, W2, x, y, *, mesh, lr):
    whole, owner = NamedSharding(mesh, P()), NamedSharding(mesh, P('X', None))

    @functools.partial(jax.jit, out_shardings=(owner, owner))
    def step(W1, W2, x, y):
        def loss(W1, W2):
            h = jax.nn.gelu(x @ jax.lax.with_sharding_constraint(W1, whole))
            return jnp.mean((h @ jax.lax.with_sharding_constraint(W2, whole) - y) ** 2)

        g1, g2 = jax.grad(loss, argnums=(0, 1))(W1, W2)
        return W1 - lr * g1, W2 - lr * g2

    return step(W1, W2, x, y)
