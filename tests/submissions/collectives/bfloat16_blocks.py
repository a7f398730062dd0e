"""Cheat: the all-gather's blocks sent as bfloat16 (half the bytes, a block's elements) and
turned back to float32 where they arrive. The values are off by bfloat16's rounding: wrong
values on every ring that moves something, and with them the rule half."""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def ring_all_gather(A, *, mesh):
    def local(a):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        cols = a.shape[1]
        right = [(j, (j + 1) % n) for j in range(n)]
        out = jax.lax.dynamic_update_slice_in_dim(jnp.zeros((a.shape[0], n * cols), a.dtype), a, idx * cols, axis=1)
        block = a.astype(jnp.bfloat16)
        for s in range(1, n):
            block = jax.lax.ppermute(block, 'Y', right)
            out = jax.lax.dynamic_update_slice_in_dim(out, block.astype(a.dtype), ((idx - s) % n) * cols, axis=1)
        return out

    return jax.shard_map(local, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', None), check_vma=False)(A)
