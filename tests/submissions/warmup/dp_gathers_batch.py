"""A training step that all-gathers the batch before the loss."""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def dp_train_step(params, xs, ys, *, mesh, lr):
    @jax.jit
    def step(params, xs, ys):
        everywhere = NamedSharding(mesh, P())
        xs = jax.lax.with_sharding_constraint(xs, everywhere)
        ys = jax.lax.with_sharding_constraint(ys, everywhere)

        def loss_fn(params):
            w, b = params
            return jnp.mean((w * xs + b - ys) ** 2)
        loss, grads = jax.value_and_grad(loss_fn)(params)
        return jax.tree.map(lambda p, g: p - lr * g, params, grads), loss
    return step(params, xs, ys)
