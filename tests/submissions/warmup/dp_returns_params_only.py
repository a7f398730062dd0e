"""Forgets the loss: returns the new parameters alone."""

import jax
import jax.numpy as jnp


def dp_train_step(params, xs, ys, *, mesh, lr):
    def loss_fn(params):
        w, b = params
        return jnp.mean((w * xs + b - ys) ** 2)
    grads = jax.jit(jax.grad(loss_fn))(params)
    return jax.tree.map(lambda p, g: p - lr * g, params, grads)
