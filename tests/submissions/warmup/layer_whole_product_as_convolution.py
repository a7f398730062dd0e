"""layer_constrained with the whole product over K on every device, written as a convolution
(counted neither by dot_flops nor by vector_flops), beside a decoy: the constrained split product
with its one all-reduce of M elements over both axes, folded in by a select no compiler can fold."""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

ALL = ('X', 'Y')


def layer_constrained(x, w, b, *, mesh):
    split_k = NamedSharding(mesh, P(ALL))

    def layer(x, w, b):
        xs = jax.lax.with_sharding_constraint(x, split_k)
        ws = jax.lax.with_sharding_constraint(w, split_k)
        decoy = xs @ ws                              # the split product: its one all-reduce of M
        # The real work, whole K on every device, as a convolution (no dot, multiply or reduce):
        # x as one signal of length K, w's columns as M filters of width K.
        K, M = w.shape
        full = jax.lax.conv_general_dilated(
            x.reshape(1, 1, K), w.T.reshape(M, 1, K), window_strides=(1,), padding="VALID",
            precision=jax.lax.Precision.HIGHEST).reshape(M)
        return jax.nn.sigmoid(full + b + jnp.where(jnp.isnan(b), decoy, 0.0))

    return jax.jit(layer)(x, w, b)
