"""total_sum: jax.jit sums each device's block with a fori_loop outside the shard_map; the
shard_map only psums the per-device numbers. Broken part: total_sum (style only)."""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

ALL = ('X', 'Y')   # both mesh axes at once: P(ALL) splits a dimension over every device


def total_sum(x, *, mesh):
    nX, nY = mesh.shape['X'], mesh.shape['Y']
    R, C = x.shape
    blocks = x.reshape(nX, R // nX, nY, C // nY)

    def loop_sum(a, axis):
        init = jnp.zeros(a.shape[:axis] + a.shape[axis + 1:], a.dtype)
        return jax.lax.fori_loop(0, a.shape[axis],
                                 lambda i, acc: acc + jax.lax.dynamic_index_in_dim(a, i, axis, keepdims=False), init)

    per_device = loop_sum(loop_sum(blocks, 1), 2)          # [nX, nY, 1]... one number per device
    per_device = per_device.reshape(nX, nY)

    def local(s):
        return jax.lax.psum(s[0, 0], ALL)

    return jax.shard_map(local, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P())(per_device)
