"""The padded buffer of the book's first hint ([E, S, D] slots, one batched matmul to [E, S, F])
as the grouping of moe_local, and through one call of it in moe_allgather and moe_allgather_x
(the old hint). Right values; the product, E/nX*S*F/nY elements on a device, is as large as a
device's share of [S, D, F] once E >= D (and the buffer once E >= F/nY): the memory half is
lost exactly on those cases, with a message that names the padded product, not W[B].

Broken parts: moe_local, moe_allgather, moe_allgather_x (memory rule only, where E >= D).
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def moe_local(W, A, B):
    # Tokens whose expert is outside [0, E) come out as zeros: the sharded versions rely on it.
    E, S = W.shape[0], A.shape[0]
    valid = (B >= 0) & (B < E)
    expert = jnp.where(valid, B, E)            # E means "no expert here" (a negative index would wrap)
    onehot = expert[:, None] == jnp.arange(E)  # [S, E]
    slot = jnp.sum(jnp.where(onehot, jnp.cumsum(onehot, axis=0) - 1, 0), axis=1)  # rank within the expert
    buffer = jnp.zeros((E, S, A.shape[1]), A.dtype).at[expert, slot].set(A, mode="drop")  # [E, S, D]
    product = jnp.einsum("esd,edf->esf", buffer, W)                                      # [E, S, F]
    out = product.at[expert, slot].get(mode="fill", fill_value=0)
    return jnp.where(valid[:, None], out, 0)


def moe_allgather_x(W, A, B, *, mesh):
    def local(w, a, b):                                         # w: [E/nX, D, F], a: [S/nX, D]
        a = jax.lax.all_gather(a, 'X', axis=0, tiled=True)      # [S, D]: every token
        b = jax.lax.all_gather(b, 'X', axis=0, tiled=True)      # [S]
        b = b - jax.lax.axis_index('X') * w.shape[0]            # my local expert ids (others: out of range)

        mine = moe_local(w, a, b)                                # [S, F], zero unless mine
        return jax.lax.psum_scatter(mine, 'X', scatter_dimension=0, tiled=True)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', None, None), P('X', None), P('X')),
                         out_specs=P('X', None))(W, A, B)
