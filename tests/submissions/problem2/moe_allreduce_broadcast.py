"""No all-to-all at all: each round, every row's chunk is broadcast to every row with an
all-reduce of one-hot slots (an all-gather in disguise), and the results come back the same
way. Right values; the rule asks for the tokens to travel by all-to-all over X.

Broken part: moe_all_to_all (rule only; moe_topk, built on it, loses the same).
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def moe_all_to_all(W, A, B, *, mesh):
    def local(w, a, b):
        a = jax.lax.all_gather(a, 'Y', axis=1, tiled=True)      # [S/nX, D]: my tokens, full rows
        tokens = a.shape[0]
        b = b.reshape(tokens, -1)                               # [S/nX, k] (k = 1 for moe_all_to_all)
        k = b.shape[1]
        expert = b.reshape(-1)                                  # one entry per (token, choice) pair
        token = jnp.repeat(jnp.arange(tokens), k)
        nX, mine = jax.lax.axis_size('X'), w.shape[0]
        me = jax.lax.axis_index('X')
        chunk = max(1, tokens // (2 * max(nX, mine)))
        pairs = expert.shape[0]
        out = jax.lax.pcast(jnp.zeros((tokens, w.shape[2]), a.dtype), ('X', 'Y'), to='varying')

        def one_round(state):
            r, out = state
            pos = r * chunk + jnp.arange(chunk)
            valid = pos < pairs
            pair = jnp.minimum(pos, pairs - 1)
            x = jnp.where(valid[:, None], a[token[pair]], 0)    # [chunk, D]
            e = jnp.where(valid, expert[pair], -1)
            # Broken: an all-reduce of one-hot slots broadcasts every row's chunk to every row
            # (an all-gather in disguise) instead of an all_to_all.
            slot = (jnp.arange(nX) == me)
            x = jax.lax.psum(jnp.where(slot[:, None, None], x[None], 0), 'X')   # [nX, chunk, D]
            e = jax.lax.psum(jnp.where(slot[:, None], e[None], 0), 'X')          # [nX, chunk]
            local_e = e - me * mine                             # outside [0, mine): not mine
            y = moe_local(w, x.reshape(-1, x.shape[-1]), local_e.reshape(-1))
            y = jax.lax.psum(y.reshape(nX, chunk, -1), 'X')[me] # every row's results, keep mine
            y = jnp.where(valid[:, None], y, 0) / k
            return r + 1, out.at[token[pair]].add(y)

        rounds = -(-pairs // chunk)
        return jax.lax.while_loop(lambda s: s[0] < rounds, one_round, (0, out))[1]

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', None, 'Y'), P('X', 'Y'), P('X')),
                         out_specs=P('X', 'Y'))(W, A, B)
