"""Top-k whose pairs carry a copy of their token made before the rounds: a[token] for all
S/nX*k (token, expert) pairs, k copies of the device's tokens. Right values; on meshes with
nX >= 2 that copy is as large as the global [S, D] activations once k >= nX, which the rule
forbids: the memory half of those cases is lost, with a message naming the k copies.

Broken part: moe_topk (memory rule only, where k >= nX).
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def moe_topk(W, A, B, *, mesh):
    def local(w, a, b):
        a = jax.lax.all_gather(a, 'Y', axis=1, tiled=True)      # [S/nX, D]: my tokens, full rows
        tokens = a.shape[0]
        b = b.reshape(tokens, -1)                               # [S/nX, k] (k = 1 for moe_all_to_all)
        k = b.shape[1]
        expert = b.reshape(-1)                                  # one entry per (token, choice) pair
        token = jnp.repeat(jnp.arange(tokens), k)
        nX, mine = jax.lax.axis_size('X'), w.shape[0]
        chunk = max(1, tokens // (2 * max(nX, mine)))           # pairs per destination per round

        dest = expert // mine
        order = jnp.argsort(dest)                               # pairs grouped by destination
        counts = jnp.bincount(dest, length=nX)
        starts = jnp.cumsum(counts) - counts
        rounds = jax.lax.pmax(jnp.max(-(-counts // chunk)), 'X')   # the busiest pair decides
        out = jax.lax.pcast(jnp.zeros((tokens, w.shape[2]), a.dtype), ('X', 'Y'), to='varying')

        copies = a[token]                                       # Broken: [S/nX*k, D], k copies

        def one_round(state):
            r, out = state
            pos = r * chunk + jnp.arange(chunk)[None, :]        # [nX, chunk]
            valid = pos < counts[:, None]
            pair = order[jnp.minimum(starts[:, None] + pos, expert.shape[0] - 1)]
            x = jnp.where(valid[..., None], copies[pair], 0)    # [nX, chunk, D]
            e = jnp.where(valid, expert[pair] % mine, mine)     # `mine` marks an empty slot
            x = jax.lax.all_to_all(x, 'X', 0, 0)                # row i now holds what device i sent
            e = jax.lax.all_to_all(e, 'X', 0, 0)
            y = moe_local(w, x.reshape(-1, x.shape[-1]), e.reshape(-1))
            y = jax.lax.all_to_all(y.reshape(nX, chunk, -1), 'X', 0, 0)   # results go home
            y = jnp.where(valid[..., None], y, 0) / k
            return r + 1, out.at[token[pair]].add(y)

        return jax.lax.while_loop(lambda s: s[0] < rounds, one_round, (0, out))[1]

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', None, 'Y'), P('X', 'Y'), P('X')),
                         out_specs=P('X', 'Y'))(W, A, B)
