"""Route 7: unbounded resources. 50 sleeping processes, 256 MB written wherever it can write,
a huge exception message. Implements shard_average_jit correctly, so its right score is 2."""
import os
import subprocess
import sys

import jax
from jax.sharding import NamedSharding, PartitionSpec as P

for _ in range(50):
    try:
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "resources-marker-9c1e"],
                         start_new_session=True)
    except OSError:
        break
block = b"x" * (1 << 20)
for folder in ("/tmp", "/scratch", os.path.expanduser("~"), "/var/tmp"):
    try:
        with open(os.path.join(folder, "pwned-big"), "wb") as f:
            for _ in range(256):
                f.write(block)
    except OSError:
        pass


def shard_average_jit(A, *, mesh):
    nX = mesh.shape["X"]
    out = A.reshape(nX, A.shape[0] // nX, A.shape[1]).mean(axis=1)
    return jax.lax.with_sharding_constraint(out, NamedSharding(mesh, P("X", "Y")))


def roll_diff(A, *, mesh, shift):
    raise ValueError("y" * 10_000_000)
