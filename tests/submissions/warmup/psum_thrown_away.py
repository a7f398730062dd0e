"""The three shard_map parts with the psum they must write, and jax.jit doing the work: each
shard_map calls jax.lax.psum, then returns jnp.where(False, psum, its input), which the
compiler folds away with the psum; jax.jit sums, multiplies or convolves around the shard_map,
and the partitioner's one all-reduce is the communication the rule asks for. (The lowered
program has the psum, the compiled one only jax.jit's: 2/2, 2/2 and 1/1 when the written psum
was all that was checked.) Each keeps the values half of its points."""
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

ALL = ('X', 'Y')


def total_sum(x, *, mesh):
    def local(block):
        s = block.sum()
        t = jax.lax.psum(s, ALL)                    # the psum the part must write
        return jnp.where(False, t, s).reshape(1)    # never used: XLA folds it away

    partial = jax.shard_map(local, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P(ALL))(x)
    return jax.jit(jnp.sum, out_shardings=NamedSharding(mesh, P()))(partial)


def layer_shard_map(x, w, b, *, mesh):
    def local(x_slice):
        s = jax.lax.psum(x_slice.sum(), ALL)
        return jnp.where(False, s, x_slice)

    x = jax.shard_map(local, mesh=mesh, in_specs=P(ALL), out_specs=P(ALL))(x)
    return jax.jit(lambda x, w, b: jax.nn.sigmoid(x @ w + b), out_shardings=NamedSharding(mesh, P()))(x, w, b)


def normalized_convolution(xs, w, *, mesh):
    def local(block):
        t = jax.lax.psum(block, ALL)
        return jnp.where(False, t, block)

    xs = jax.shard_map(local, mesh=mesh, in_specs=P(ALL), out_specs=P(ALL))(xs)

    def conv(xs, w):
        length = xs.shape[1]
        c = jnp.stack([xs[:, i:i + 3] @ w for i in range(length - 2)], axis=1)
        return c / c.sum(axis=0)

    return jax.jit(conv, out_shardings=NamedSharding(mesh, P(ALL)))(xs, w)
