"""fsdp_train_step ported from the pmap tutorial: the weights taken whole (in_specs P(), so jax.jit
gathers them at the shard_map's boundary), the mean over each device's own rows, and a pmean of
the gradients. Under check_vma the gradient of a value every device shares already comes back
summed (a psum: an all-reduce), so the pmean divides nothing: the step is nX times too long, and
the whole gradients cross X by all-reduce."""

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def fsdp_train_step(W1, W2, x, y, *, mesh, lr):
    def local(W1, W2, xb, yb):
        def loss(W1, W2):
            return jnp.mean((jax.nn.gelu(xb @ W1) @ W2 - yb) ** 2)

        g1, g2 = jax.grad(loss, argnums=(0, 1))(W1, W2)
        g1, g2 = jax.lax.pmean(g1, 'X'), jax.lax.pmean(g2, 'X')
        i = jax.lax.axis_index('X')
        rows1, rows2 = W1.shape[0] // jax.lax.axis_size('X'), W2.shape[0] // jax.lax.axis_size('X')
        new1 = jax.lax.dynamic_slice_in_dim(W1 - lr * g1, i * rows1, rows1, axis=0)
        new2 = jax.lax.dynamic_slice_in_dim(W2 - lr * g2, i * rows2, rows2, axis=0)
        return new1, new2

    return jax.shard_map(local, mesh=mesh, in_specs=(P(), P(), P('X', None), P('X', None)),
                         out_specs=(P('X', None), P('X', None)))(W1, W2, x, y)
