"""dp_train_step with the learning rate hard-coded to the visible check's 0.1: right loss,
wrong parameters wherever the hidden lr differs. Not the pmean over-count, so the message must
not blame a pmean (the hint names that mistake only when the step is exactly N times too long).

Broken part: dp_train_step (values only, on cases with lr != 0.1).
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

ALL = ('X', 'Y')   # both mesh axes at once: P(ALL) splits a dimension over every device


def dp_train_step(params, xs, ys, *, mesh, lr):
    global_batch = xs.shape[0]

    def local(params, xs, ys):
        def loss_fn(params):
            w, b = params
            return jax.lax.psum(jnp.sum((w * xs + b - ys) ** 2), ALL) / global_batch

        loss, grads = jax.value_and_grad(loss_fn)(params)
        return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads), loss   # Broken: lr ignored

    return jax.shard_map(local, mesh=mesh, in_specs=(P(), P(ALL), P(ALL)),
                         out_specs=P())(params, xs, ys)
