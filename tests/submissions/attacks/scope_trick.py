"""Route 6: "written with shard_map" judged from text. A plain jax.jit program inside
jax.named_scope("manual_computation") whose locations carry the word. Right values, so it
keeps the values half of the points and loses the rule half."""
import jax
from jax.sharding import NamedSharding, PartitionSpec as P


def shard_average_shard_map(A, *, mesh):
    with jax.named_scope("manual_computation"):
        nX = mesh.shape["X"]
        out = A.reshape(nX, A.shape[0] // nX, A.shape[1]).mean(axis=1)
        return jax.lax.with_sharding_constraint(out, NamedSharding(mesh, P("X", "Y")))
