"""fsdp_train_step whose loss is the pmean over X of each device's own mean, inside a shard_map with
check_vma=False: without the type that says the loss is the same on every device, JAX transposes
the psum inside pmean into another psum, so the cotangent arrives nX times and the pmean divides
nothing away: the step is nX times too long on every mesh with nX > 1, and the hint (H001) says so,
naming check_vma."""

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def fsdp_train_step(W1, W2, x, y, *, mesh, lr):
    def local(w1, w2, xb, yb):
        def loss(w1, w2):
            W1 = jax.lax.all_gather(w1, 'X', axis=0, tiled=True)
            W2 = jax.lax.all_gather(w2, 'X', axis=0, tiled=True)
            return jax.lax.pmean(jnp.mean((jax.nn.gelu(xb @ W1) @ W2 - yb) ** 2), 'X')

        g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2)
        return w1 - lr * g1, w2 - lr * g2

    spec = P('X', None)
    return jax.shard_map(local, mesh=mesh, in_specs=(spec,) * 4, out_specs=(spec, spec),
                         check_vma=False)(W1, W2, x, y)
