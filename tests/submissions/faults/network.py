"""Tries the network while being imported: a connection to a local port the test listens
on (its number in the environment variable FAULT_LISTEN_PORT) and a name lookup. Both must
fail in the grading child; the two functions it defines are right, so they get full marks
either way, and the test checks that its listener saw no connection."""
import os
import socket

import jax
from jax.sharding import NamedSharding, PartitionSpec as P

PORT = int(os.environ.get("FAULT_LISTEN_PORT", "9"))
try:
    socket.create_connection(("127.0.0.1", PORT), timeout=2).close()
except OSError:
    pass
try:
    socket.getaddrinfo("localhost", PORT)
except OSError:
    pass


def shard_average_jit(A, *, mesh):
    nX = mesh.shape['X']
    S, D = A.shape
    return jax.jit(lambda a: a.reshape(nX, S // nX, D).mean(axis=1),
                   out_shardings=NamedSharding(mesh, P('X', 'Y')))(A)


def shard_average_shard_map(A, *, mesh):
    return jax.shard_map(lambda a: a.mean(axis=0, keepdims=True), mesh=mesh,
                         in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)
