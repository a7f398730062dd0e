"""The dense W[B] gather: moe_local copies one [D, F] matrix per token (an [S, D, F]
value). Right values, memory rule broken: half of moe_local's points. moe_jit calls the same
moe_local, but its rule checks nothing, so it keeps full marks.

Broken part: moe_local (memory rule only). Every other function is the reference solution,
which reuses a correct expert reorder of its own.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def moe_local(W, A, B):
    # Broken: W[B] is [S, D, F], one expert matrix per token.
    return jnp.einsum("sd,sdf->sf", A, W[B])


def grouped(W, A, B):
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


def moe_allgather(W, A, B, *, mesh):
    def local(w, a, b):
        a = jax.lax.all_gather(a, 'Y', axis=1, tiled=True)      # [S/nX, D]: full rows
        a = jax.lax.all_gather(a, 'X', axis=0, tiled=True)      # [S, D]: every token
        b = jax.lax.all_gather(b, 'X', axis=0, tiled=True)      # [S]
        first = jax.lax.axis_index('X') * w.shape[0]            # my first expert
        mine = grouped(w, a, b - first)                       # [S, F/nY], zero unless my expert
        return jax.lax.psum_scatter(mine, 'X', scatter_dimension=0, tiled=True)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', None, 'Y'), P('X', 'Y'), P('X')),
                         out_specs=P('X', 'Y'))(W, A, B)


def moe_all_to_all(W, A, B, *, mesh):
    def local(w, a, b):
        a = jax.lax.all_gather(a, 'Y', axis=1, tiled=True)      # [S/nX, D]: my tokens, full rows
        tokens = a.shape[0]
        b = b.reshape(tokens, -1)                               # [S/nX, k] (k = 1 for moe_all_to_all)
        k = b.shape[1]
        expert = b.reshape(-1)                                  # one entry per (token, choice) pair
        token = jnp.repeat(jnp.arange(tokens), k)
        nX, mine = jax.lax.axis_size('X'), w.shape[0]
        chunk = max(1, tokens // 4)                             # pairs per destination per round

        dest = expert // mine
        order = jnp.argsort(dest)                               # pairs grouped by destination
        counts = jnp.bincount(dest, length=nX)
        starts = jnp.cumsum(counts) - counts
        rounds = jax.lax.pmax(jnp.max(-(-counts // chunk)), 'X')   # the busiest pair decides
        out = jax.lax.pcast(jnp.zeros((tokens, w.shape[2]), a.dtype), ('X', 'Y'), to='varying')

        def one_round(state):
            r, out = state
            pos = r * chunk + jnp.arange(chunk)[None, :]        # [nX, chunk]
            valid = pos < counts[:, None]
            pair = order[jnp.minimum(starts[:, None] + pos, expert.shape[0] - 1)]
            x = jnp.where(valid[..., None], a[token[pair]], 0)  # [nX, chunk, D]
            e = jnp.where(valid, expert[pair] % mine, mine)     # `mine` marks an empty slot
            x = jax.lax.all_to_all(x, 'X', 0, 0)                # row i now holds what device i sent
            e = jax.lax.all_to_all(e, 'X', 0, 0)
            y = grouped(w, x.reshape(-1, x.shape[-1]), e.reshape(-1))
            y = jax.lax.all_to_all(y.reshape(nX, chunk, -1), 'X', 0, 0)   # results go home
            y = jnp.where(valid[..., None], y, 0) / k
            return r + 1, out.at[token[pair]].add(y)

        return jax.lax.while_loop(lambda s: s[0] < rounds, one_round, (0, out))[1]

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', None, 'Y'), P('X', 'Y'), P('X')),
                         out_specs=P('X', 'Y'))(W, A, B)
