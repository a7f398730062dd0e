"""Red team: fsdp_train_step that spells data parallelism's all-reduce as a psum_scatter followed
by an all_gather of each gradient (the two halves of a ring all-reduce), then keeps its own rows.
Only all-gathers and reduce-scatters appear, and the values are right, but each gradient crosses X
twice: the bytes bound catches it."""

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def fsdp_train_step(W1, W2, x, y, *, mesh, lr):
    B, D = x.shape

    def local(w1, w2, xb, yb):
        def loss(w1, w2):
            W1 = jax.lax.all_gather(w1, 'X', axis=0, tiled=True)
            W2 = jax.lax.all_gather(w2, 'X', axis=0, tiled=True)
            return jnp.sum((jax.nn.gelu(xb @ W1) @ W2 - yb) ** 2) / (B * D)

        g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2)         # reduce-scattered
        G1 = jax.lax.all_gather(g1, 'X', axis=0, tiled=True)    # ... and gathered again
        G2 = jax.lax.all_gather(g2, 'X', axis=0, tiled=True)
        i = jax.lax.axis_index('X')
        g1 = jax.lax.dynamic_slice_in_dim(G1, i * w1.shape[0], w1.shape[0], axis=0)
        g2 = jax.lax.dynamic_slice_in_dim(G2, i * w2.shape[0], w2.shape[0], axis=0)
        return w1 - lr * g1, w2 - lr * g2

    spec = P('X', None)
    return jax.shard_map(local, mesh=mesh, in_specs=(spec,) * 4, out_specs=(spec, spec))(W1, W2, x, y)
