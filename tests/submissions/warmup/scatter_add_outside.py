"""The three warm-up shard_map parts (total_sum, layer_shard_map, normalized_convolution) with
a decoy shard_map (its psum thrown away, as in psum_thrown_away.py) and jax.jit doing all the
work around it with no reduce, dot or convolution: elementwise products, slices and adds,
then a scatter-add (`.at[zeros].add`) whose partitioned form is a local scatter plus the one
all-reduce the rule asks for (total_sum first adds each device's block by slices, so the
scatter sees one number per device). work_outside_shard_map looks only for
reduce/reduce_window/dot/convolution, so it sees nothing.

Broken parts: total_sum, layer_shard_map, normalized_convolution (style only: expected to keep
the values half). Every other function is the reference solution."""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

ALL = ('X', 'Y')


def _decoy(a, mesh, spec):
    def local(block):
        t = jax.lax.psum(block, ALL)               # the psum the part must write
        return jnp.where(False, t, block)          # folded away by XLA

    return jax.shard_map(local, mesh=mesh, in_specs=spec, out_specs=spec)(a)


def _adds(a, axis):
    parts = [jax.lax.index_in_dim(a, i, axis, keepdims=False) for i in range(a.shape[axis])]
    out = parts[0]
    for p in parts[1:]:
        out = out + p
    return out


def total_sum(x, *, mesh):
    x = _decoy(x, mesh, P('X', 'Y'))
    nX, nY = mesh.shape['X'], mesh.shape['Y']
    R, C = x.shape
    blocks = x.reshape(nX, R // nX, nY, C // nY)
    per_device = _adds(_adds(blocks, 1), 2).reshape(nX * nY)       # one number per device
    per_device = jax.lax.with_sharding_constraint(per_device, NamedSharding(mesh, P(ALL)))
    return jnp.zeros((1,), x.dtype).at[jnp.zeros(nX * nY, jnp.int32)].add(per_device)[0]


def layer_shard_map(x, w, b, *, mesh):
    x = _decoy(x, mesh, P(ALL))
    K, M = w.shape
    prod = x[:, None] * w                                      # [K, M], split on K
    s = jnp.zeros((1, M), w.dtype).at[jnp.zeros(K, jnp.int32)].add(prod)[0]
    return jax.nn.sigmoid(s + b)


def normalized_convolution(xs, w, *, mesh):
    xs = _decoy(xs, mesh, P(ALL))
    N, L = xs.shape
    c = xs[:, 0:L - 2] * w[0] + xs[:, 1:L - 1] * w[1] + xs[:, 2:L] * w[2]
    sums = jnp.zeros((1, L - 2), xs.dtype).at[jnp.zeros(N, jnp.int32)].add(c)
    return c / sums
