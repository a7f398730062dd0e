"""An all-to-all that sends every token to every row (each row keeps only the tokens of its
own experts): right values, but nX times the rounds and bytes of routing each token only to
its expert's row. The rule bounds the bytes moved over X by the case's routing.

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
        chunk = max(1, tokens // (2 * max(nX, mine)))
        pairs = expert.shape[0]
        dest = expert // mine
        out = jax.lax.pcast(jnp.zeros((tokens, w.shape[2]), a.dtype), ('X', 'Y'), to='varying')

        def one_round(state):
            r, out = state
            pos = r * chunk + jnp.arange(chunk)                 # [chunk]
            valid = pos < pairs
            pair = jnp.minimum(pos, pairs - 1)
            x = jnp.where(valid[:, None], a[token[pair]], 0)    # [chunk, D]
            # Broken: every pair goes to every row; only its expert's row uses it.
            x = jnp.broadcast_to(x, (nX, chunk, x.shape[-1]))
            to_row = valid[None, :] & (dest[pair][None, :] == jnp.arange(nX)[:, None])
            e = jnp.where(to_row, expert[pair] % mine, mine)    # [nX, chunk]
            x = jax.lax.all_to_all(x, 'X', 0, 0)
            e = jax.lax.all_to_all(e, 'X', 0, 0)
            y = moe_local(w, x.reshape(-1, x.shape[-1]), e.reshape(-1))
            y = jax.lax.all_to_all(y.reshape(nX, chunk, -1), 'X', 0, 0).sum(0)   # zero but from its row
            y = jnp.where(valid[:, None], y, 0) / k
            return r + 1, out.at[token[pair]].add(y)

        rounds = -(-pairs // chunk)                             # every pair, to every row
        return jax.lax.while_loop(lambda s: s[0] < rounds, one_round, (0, out))[1]

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', None, 'Y'), P('X', 'Y'), P('X')),
                         out_specs=P('X', 'Y'))(W, A, B)
