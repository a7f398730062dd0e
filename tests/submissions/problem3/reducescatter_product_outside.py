"""reducescatter_matmul (and transformer_block) whose matmul is done by jax.jit outside the
shard_map (T and W2 reshaped so that the shard index of F is a batch dimension: an einsum with no
communication makes each device's whole [B/nX, D] partial product); the shard_map is only a
ring reduce-scatter of those products, nothing left in it to overlap."""

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def reducescatter_matmul(T, W2, *, mesh):
    nY = mesh.shape['Y']
    B, F = T.shape
    D = W2.shape[1]
    NS = jax.sharding.NamedSharding
    # The partial products, one per Y-shard of F, by jax.jit outside any shard_map: a batched
    # einsum over the shard index k needs no communication.
    t3 = jax.lax.with_sharding_constraint(T.reshape(B, nY, F // nY), NS(mesh, P('X', 'Y', None)))
    w3 = jax.lax.with_sharding_constraint(W2.reshape(nY, F // nY, D), NS(mesh, P('Y', None, None)))
    parts = jnp.einsum('bkf,kfd->bkd', t3, w3)
    parts = jax.lax.with_sharding_constraint(parts, NS(mesh, P('X', 'Y', None)))

    def ring(p):                          # p: [B/nX, 1, D], this device's partial product
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        chunk = p.shape[2] // n

        def block(b):
            return jax.lax.dynamic_slice_in_dim(p[:, 0], b * chunk, chunk, axis=1)

        def step(s, acc):
            acc = jax.lax.ppermute(acc, 'Y', [(j, (j - 1) % n) for j in range(n)])
            return acc + block((idx + s + 1) % n)

        return jax.lax.fori_loop(1, n, step, block((idx + 1) % n))

    return jax.shard_map(ring, mesh=mesh, in_specs=P('X', 'Y', None), out_specs=P('X', 'Y'))(parts)
