"""A typical first attempt at the warm-up: five functions right, four with classic mistakes."""
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

ALL = ('X', 'Y')


def place(x, *, mesh):
    return jax.device_put(x, NamedSharding(mesh, P('X', 'Y')))


def sum_rows_fully_sharded(x, *, mesh):
    # Mistake: leaves the layout to the compiler, which splits the sums over Y only.
    return jax.jit(lambda x: x.sum(axis=0))(x)


def total_sum(x, *, mesh):
    return jax.shard_map(lambda block: jax.lax.psum(block.sum(), ALL), mesh=mesh,
                         in_specs=P('X', 'Y'), out_specs=P())(x)


def layer_auto(x, w, b, *, mesh):
    return jax.jit(lambda x, w, b: jax.nn.sigmoid(x @ w + b))(x, w, b)


def layer_constrained(x, w, b, *, mesh):
    # Mistake: no constraints, so every device computes the whole layer on its own.
    return jax.jit(lambda x, w, b: jax.nn.sigmoid(x @ w + b))(x, w, b)


def layer_shard_map(x, w, b, *, mesh):
    return jax.shard_map(lambda x, w, b: jax.nn.sigmoid(jax.lax.psum(x @ w, ALL) + b), mesh=mesh,
                         in_specs=(P(ALL), P(ALL), P()), out_specs=P())(x, w, b)


def normalized_convolution(xs, w, *, mesh):
    def local(rows, w):
        c = jnp.stack([rows[:, i:i + 3] @ w for i in range(rows.shape[1] - 2)], axis=1)
        return c / jax.lax.psum(c, ALL)
    return jax.shard_map(local, mesh=mesh, in_specs=(P(ALL), P()), out_specs=P(ALL))(xs, w)


def dp_train_step(params, xs, ys, *, mesh, lr):
    # Mistake: the pmap tutorial's update ported as is. With check_vma on, the gradient of
    # the replicated parameters is already summed over devices; pmean leaves it N times too big.
    def local(params, xs, ys):
        def loss_fn(params):
            w, b = params
            return jnp.mean((w * xs + b - ys) ** 2)
        loss, grads = jax.value_and_grad(loss_fn)(params)
        grads, loss = jax.lax.pmean(grads, ALL), jax.lax.pmean(loss, ALL)
        return jax.tree.map(lambda p, g: p - lr * g, params, grads), loss
    return jax.shard_map(local, mesh=mesh, in_specs=(P(), P(ALL), P(ALL)), out_specs=P())(params, xs, ys)


def explicit_matmul(x, w, *, mesh):
    # Mistake: on an Explicit mesh the output sharding of this product is ambiguous.
    return x @ w
