"""layer_constrained with the work not split, and no dot to show it: every device computes
sum(x[:, None] * w, axis=0), the whole product over K from the replicated inputs, as a
multiply and a sum. The constrained, sharded product is computed too, with its one all-reduce
of M elements over every axis, but enters the result only times a zero the compiler cannot
fold: a decoy. (A bound on dot instructions alone gave it 2/2.)"""
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def layer_constrained(x, w, b, *, mesh):
    def f(x, w, b):
        sh = NamedSharding(mesh, P(('X', 'Y')))
        xs = jax.lax.with_sharding_constraint(x, sh)
        ws = jax.lax.with_sharding_constraint(w, sh)
        decoy = xs @ ws                                   # the sharded product: one all-reduce of M
        full = jnp.sum(x[:, None] * w, axis=0)            # the real work, on every device, no dot
        zero = jnp.where(jnp.isnan(b), 1.0, 0.0)          # 0 on real data, not foldable
        return jax.nn.sigmoid(full + b + zero * decoy)
    return jax.jit(f)(x, w, b)
