"""layer_constrained without the constraints: right values, but nothing is sharded."""

import jax


def layer_constrained(x, w, b, *, mesh):
    return jax.jit(lambda x, w, b: jax.nn.sigmoid(x @ w + b))(x, w, b)
