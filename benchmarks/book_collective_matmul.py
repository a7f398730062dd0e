"""The cost model against the book's own measurements of its collective matmul example.

    python benchmarks/book_collective_matmul.py

How To Scale Your Model, Part 10, times its worked example on a TPU v5e-8 used as a 2x4
mesh, B, D, F = 1024, 2048, 8192, with arrays from jnp.arange (int32, which the matrix
units do not run): 311 us for plain jax.jit, 244 us for the collective matmul, and 224 us
for the same matmul with no sharding on the contracting dimension. Taking 224 us as the
compute time, the kit's model (assignments/costs.py) predicts the other two from what the
compiled programs communicate: plain jit = compute + its blocking all-gather; collective
matmul = compute overlapped with its ring of permutes, step by step. This compiles both
programs here (on the CPU, from abstract inputs) and prints predicted beside measured.
"""
from __future__ import annotations

import functools
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import assignments  # noqa: E402

assignments.setup_devices(8)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

from assignments.costs import CHIPS, collective_seconds, pipelined_seconds  # noqa: E402
from solutions.problem3 import allgather_matmul  # noqa: E402

BOOK = {"plain jax.jit": 311e-6, "collective matmul": 244e-6, "no contracting sharding": 224e-6}


def compile_abstract(fn, mesh, B, D, F):
    a = jax.ShapeDtypeStruct((B, D), jnp.int32, sharding=NamedSharding(mesh, P("X", "Y")))
    w = jax.ShapeDtypeStruct((D, F), jnp.int32, sharding=NamedSharding(mesh, P(None, "Y")))
    return jax.jit(fn).lower(a, w).compile()


def main() -> None:
    mesh = assignments.make_mesh((2, 4))
    B, D, F = 1024, 2048, 8192
    chip = CHIPS["TPU v5e"]
    compute = BOOK["no contracting sharding"]
    plain = jax.jit(lambda a, w: a @ w, out_shardings=NamedSharding(mesh, P("X", "Y")))
    collective = functools.partial(allgather_matmul, mesh=mesh)
    analyses = {name: assignments.analyze(compile_abstract(f, mesh, B, D, F), mesh)
                for name, f in (("plain jax.jit", plain), ("collective matmul", collective))}

    # plain jit: the all-gather blocks the matmul, so the times add up.
    jit_comm = sum(collective_seconds(c, chip) * (c.count or 1) for c in analyses["plain jax.jit"].collectives)
    predicted_jit = compute + jit_comm
    # collective matmul: nY steps; in each, the matmul of one chunk hides the next permute.
    ring_comm = sum(collective_seconds(c, chip) * (c.count or 1)
                    for c in analyses["collective matmul"].of_kind("collective-permute"))
    predicted_cm = pipelined_seconds(compute, ring_comm, steps=mesh.shape["Y"])

    print("Book's worked example on TPU v5e, 2x4 mesh, B, D, F = 1024, 2048, 8192 (int32)")
    print(f"JAX {jax.__version__}; compute time taken from the book: {compute * 1e6:.0f} us\n")
    print(f"{'program':22s} {'communication (from the compiled HLO)':48s} {'predicted':>10s} "
          f"{'measured':>9s} {'ratio':>6s}")
    for name, predicted in (("plain jax.jit", predicted_jit), ("collective matmul", predicted_cm)):
        comm = "; ".join(f"{c.kind} over {'+'.join(c.axes)} {c.shape} x{c.count}"
                         for c in analyses[name].collectives)
        measured = BOOK[name]
        print(f"{name:22s} {comm[:48]:48s} {predicted * 1e6:8.0f}us {measured * 1e6:7.0f}us "
              f"{predicted / measured:6.2f}")
    line = 2 * jit_comm  # no wraparound link: the gather runs along a line, each way once
    print(f"\nplain jax.jit if the 4-chip Y axis has no wraparound link (a line, not a ring): "
          f"{(compute + line) * 1e6:.0f} us predicted, ratio {(compute + line) / BOOK['plain jax.jit']:.2f}")
    print(f"speed-up of the collective matmul: predicted {predicted_jit / predicted_cm:.2f}x, "
          f"measured {BOOK['plain jax.jit'] / BOOK['collective matmul']:.2f}x")


if __name__ == "__main__":
    main()
