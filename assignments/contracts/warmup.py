"""Assignment warmup: SPMD basics, after the JAX tutorials (PROBLEMS.md, Assignment 0).

Devices and meshes, placing an array, automatic parallelism with `jax.jit`, constraints with
`with_sharding_constraint`, manual parallelism with `shard_map` and `psum`, one layer written
three ways, the pmap tutorial's normalized convolution and data-parallel training step in
today's JAX, and one function on an Explicit-mode mesh. The ideas follow *How To Scale Your
Model*, Part 10 (https://jax-ml.github.io/scaling-book/jax-stuff/).
"""
from __future__ import annotations

import numpy as np

from ..contract import Arg, Assignment, Case, Part, Tree
from ..style_rules import JitOnly, UsesShardMap, WorkInsideShardMap, WritesCollective
from ..rules import (AllOf, ValuesHint, AnyCommunication, Exactly, MaxMatmulFlops, MaxTotalBytes, NoCommunication, OnlyKinds,
                     ReducesOverAll)

ALL = ("X", "Y")
"""Both mesh axes together: ``P(ALL)`` splits a dimension over every device."""


def _devices(s: dict) -> int:
    return s["nX"] * s["nY"]


def _one_reduction(s: dict) -> int:
    """One all-reduce on a mesh with more than one device, none on a single device."""
    return int(_devices(s) > 1)


# --- references (float64 NumPy) -----------------------------------------------------------

def identity(x, *, mesh):
    return x


def sum_rows(x, *, mesh):
    return x.sum(axis=0)


def total(x, *, mesh):
    return np.asarray(x.sum())


def layer(x, w, b, *, mesh):
    return 1.0 / (1.0 + np.exp(-(x @ w + b)))


def convolve_rows(xs, w):
    """c[r, i] = xs[r, i:i+3] @ w for i in [0, L-2): the tutorial's convolve, no flip."""
    L = xs.shape[1]
    return np.stack([xs[:, i:i + 3] @ w for i in range(L - 2)], axis=1)


def normalized_convolution(xs, w, *, mesh):
    c = convolve_rows(xs, w)
    return c / c.sum(axis=0)


def sgd_step(params, xs, ys, *, mesh, lr):
    """One SGD step on the mean squared error of w*x + b over the whole batch."""
    w, b = params
    err = w * xs + b - ys
    loss = np.mean(err ** 2)
    grad_w, grad_b = np.mean(2 * err * xs), np.mean(2 * err)
    return (np.asarray(w - lr * grad_w), np.asarray(b - lr * grad_b)), np.asarray(loss)


def sgd_step_n_times(params, xs, ys, *, mesh, lr):
    """The pmap tutorial's pmean ported as is: the gradient summed over the N devices, so the
    step is N times too long (the loss is still right). `values_hint` names it only then."""
    return sgd_step(params, xs, ys, mesh=mesh, lr=lr * mesh[0] * mesh[1])


def matmul(x, w, *, mesh):
    return x @ w


# --- well-conditioned inputs ----------------------------------------------------------------

def layer_inputs(case: Case, rng) -> list:
    """x ~ N(0, 1), w scaled by 1/sqrt(K): pre-activations of order one, so the sigmoid
    does not saturate and a wrong sum shows in the values."""
    K, M = case.sizes["K"], case.sizes["M"]
    x = rng.standard_normal(K)
    w = rng.standard_normal((K, M)) / np.sqrt(K)
    b = 0.5 * rng.standard_normal(M)
    return [a.astype(np.float32) for a in (x, w, b)]


def convolution_inputs(case: Case, rng) -> list:
    """Positive data and weights: every column sum of c is far from zero."""
    N, L = case.sizes["N"], case.sizes["L"]
    xs = rng.uniform(0.5, 2.0, size=(N, L))
    w = rng.uniform(0.5, 1.5, size=3)
    return [xs.astype(np.float32), w.astype(np.float32)]


def regression_inputs(case: Case, rng) -> list:
    """Data from y = 2x - 1 + noise, and parameters far from the fit."""
    Bt = case.sizes["Bt"]
    xs = rng.standard_normal((Bt, 1))
    ys = 2.0 * xs - 1.0 + 0.5 * rng.standard_normal((Bt, 1))
    w, b = rng.standard_normal(2)
    params = (np.asarray(w, dtype=np.float32), np.asarray(b, dtype=np.float32))
    return [params, xs.astype(np.float32), ys.astype(np.float32)]


def normal_inputs(case: Case, rng, shapes) -> list:
    return [rng.standard_normal(tuple(case.all_sizes[d] for d in dims)).astype(np.float32)
            for dims in shapes]


# --- the contract ---------------------------------------------------------------------------

X_2D = Arg("x", ("R", "C"), ("X", "Y"))
LAYER_SIZES = {"K": 32, "M": 4}
# Only the reduction: w (or x) gathered by an all-gather, or by an all-to-all of tiled copies
# beside a decoy psum, moves what each device already has a share of.
ONLY_THE_REDUCTION = OnlyKinds(
    ("all-reduce",),
    why="Each device already holds the rows of w that meet its slice of x: multiply those, "
        "then add up the M partial results (psum); gathering w moves the whole matrix.")
ONE_REDUCTION_OF_M = Exactly("all-reduce", _one_reduction, elements=lambda s: s["M"],
                            what="one, of M elements (none on a 1-device mesh)")
SPLIT_OVER_ALL = ReducesOverAll(
    "all-reduce", why="Constrain x and w to be sharded on K over both axes, P(('X', 'Y')), so that "
                      "every device multiplies its own slice and the all-reduce XLA inserts adds them all")

SHARE_OF_THE_PRODUCT = MaxMatmulFlops(
    lambda s: 3 * s["K"] * s["M"] // (s["nX"] * s["nY"]),   # 1.5x a device's 2*K*M/N
    why="x @ w on the whole K on every device does the work N times over; the constrained, "
        "sharded product is the one the result must come from")

REPLICATED_SCALAR = ()
PARAMS = Tree("params", (Arg("w", (), REPLICATED_SCALAR), Arg("b", (), REPLICATED_SCALAR)))
BATCH = (ALL,)

SGD_HINT = ("The reference is one SGD step on the whole batch, as on one device. "
                        "A step N times too long means the gradient was summed over the "
                        "devices, not averaged: under shard_map (check_vma on) the gradient of "
                        "replicated parameters already comes back summed, so a pmean of it "
                        "divides nothing. Write the loss over the whole batch (psum, then "
                        "divide by the global batch size).")
"""On a step N times too long: the gradient summed over the devices, not averaged."""


ASSIGNMENT = Assignment(
    name="warmup",
    title="Warm-up: SPMD basics, from the JAX tutorials",
    book_url="https://jax-ml.github.io/scaling-book/jax-stuff/",
    parts=(
        Part(
            name="place", points=1, eager=True,
            task="Return x (a concrete array on one device) placed on the mesh as P('X', 'Y').",
            args=(X_2D,), result=Arg("out", ("R", "C"), ("X", "Y")),
            rules=(NoCommunication(),), reference=identity,
            visible_case=Case(mesh=(2, 4), sizes={"R": 8, "C": 8}),
        ),
        Part(
            name="sum_rows_fully_sharded", points=1,
            task="x.sum(0), sharded over all devices P(('X','Y')), using "
                 "jax.lax.with_sharding_constraint inside jax.jit.",
            args=(X_2D,), result=Arg("out", ("C",), (ALL,)),
            rules=(AnyCommunication(), JitOnly()), reference=sum_rows,
            visible_case=Case(mesh=(2, 4), sizes={"R": 4, "C": 16}),
        ),
        Part(
            name="total_sum", points=1,
            task="The sum of every element, replicated; shard_map + psum.",
            args=(X_2D,), result=Arg("out", (), ()),
            rules=(AllOf((Exactly("all-reduce", _one_reduction, elements=1,
                                  what="one, of one element (none on a 1-device mesh)"),
                         OnlyKinds(("all-reduce",),
                                   why="Sum your own block first, then psum one number."))),
                    UsesShardMap(), WorkInsideShardMap(), WritesCollective("all_reduce")),
            reference=total,
            visible_case=Case(mesh=(2, 4), sizes={"R": 4, "C": 8}),
        ),
        Part(
            name="layer_auto", points=1,
            task="sigmoid(x @ w + b) with x and w sharded on K over all devices; plain jax.jit.",
            args=(Arg("x", ("K",), (ALL,)), Arg("w", ("K", "M"), (ALL,)), Arg("b", ("M",), ())),
            result=Arg("out", ("M",), ()), rules=(AnyCommunication(), JitOnly()), reference=layer,
            inputs=layer_inputs, visible_case=Case(mesh=(2, 4), sizes=LAYER_SIZES),
        ),
        Part(
            name="layer_constrained", points=2,
            task="The same layer; x and w arrive replicated and the function constrains them "
                 "to be sharded on K over all devices.",
            args=(Arg("x", ("K",), ()), Arg("w", ("K", "M"), ()), Arg("b", ("M",), ())),
            result=Arg("out", ("M",), ()),
            rules=(AllOf((ONE_REDUCTION_OF_M, ONLY_THE_REDUCTION, SPLIT_OVER_ALL, SHARE_OF_THE_PRODUCT)),
                    JitOnly()),
            reference=layer, inputs=layer_inputs,
            visible_case=Case(mesh=(2, 4), sizes=LAYER_SIZES),
        ),
        Part(
            name="layer_shard_map", points=2,
            task="The same layer and input shardings as layer_auto, with shard_map + psum.",
            args=(Arg("x", ("K",), (ALL,)), Arg("w", ("K", "M"), (ALL,)), Arg("b", ("M",), ())),
            result=Arg("out", ("M",), ()),
            rules=(AllOf((ONE_REDUCTION_OF_M, ONLY_THE_REDUCTION)),
                    UsesShardMap(), WorkInsideShardMap(), WritesCollective("all_reduce")),
            reference=layer, inputs=layer_inputs,
            visible_case=Case(mesh=(2, 4), sizes=LAYER_SIZES),
        ),
        Part(
            name="normalized_convolution", points=2,
            task="c[r, i] = xs[r, i:i+3] @ w, divided elementwise by the sum of c over rows; "
                 "one row per device, with shard_map.",
            args=(Arg("xs", ("N", "L"), (ALL,)), Arg("w", (3,), ())),
            result=Arg("out", ("N", "Lc"), (ALL,)),
            rules=(AllOf((Exactly("all-reduce", _one_reduction, elements=lambda s: s["L"] - 2,
                                  what="one, of L-2 elements (none on a 1-device mesh)"),
                         OnlyKinds(("all-reduce",),
                                   why="Each device convolves its own row; only the column "
                                       "sums need to travel (one psum)."))),
                    UsesShardMap(), WorkInsideShardMap(), WritesCollective("all_reduce")),
            reference=normalized_convolution, inputs=convolution_inputs,
            visible_case=Case(mesh=(2, 4), sizes={"N": 8, "L": 5, "Lc": 3}),
        ),
        Part(
            name="dp_train_step", points=3, statics=("lr",),
            task="One SGD step of w*x + b on mean squared error, the batch sharded over all "
                 "devices, parameters replicated; returns ((w, b), loss).",
            args=(PARAMS, Arg("xs", ("Bt", 1), BATCH), Arg("ys", ("Bt", 1), BATCH)),
            result=Tree("out", (Tree("new_params", (Arg("w", (), ()), Arg("b", (), ()))),
                                Arg("loss", (), ()))),
            # One rule, so that an all-gather of the batch is reported once.
            rules=(AllOf((OnlyKinds(("all-reduce",),
                                   why="Each device needs only the gradient summed over the batch, "
                                       "a few numbers: reduce those (psum), not the batch (no "
                                       "all-gather)."),
                         # An all-gather written as a psum of zero-padded shards is still one: the
                         # gradient and the loss are a few numbers, the batch is Bt of them.
                         MaxTotalBytes(lambda s: (s["Bt"] - 1) * 4,
                                       what="Bt-1 float32 values, fewer than the batch: the gradient and "
                                            "the loss are a few numbers, so a psum of the whole batch "
                                            "(zero-padded shards) is an all-gather by another name",
                                       kinds=("all-reduce",)))),
                   ValuesHint(when=sgd_step_n_times, text=SGD_HINT)),
            reference=sgd_step, inputs=regression_inputs,
            visible_case=Case(mesh=(2, 4), sizes={"Bt": 32}, statics={"lr": 0.1}),
        ),
        # The item 3 (explicit sharding mode): not yet in PROBLEMS.md's Assignment 0
        # table; the lead raises it there. x f32[B, D] at P('X','Y'), w f32[D, F] at
        # P('Y', None) on a mesh with AxisType.Explicit axes: x @ w, f32[B, F] at P('X','Y').
        # A plain `x @ w` is a type error here (both contracting dimensions are sharded over
        # Y, so the output's sharding is ambiguous); the student resolves it with
        # out_sharding, which reduces the partial products instead of gathering an input.
        Part(
            name="explicit_matmul", points=2, axis_types="explicit",
            task="x @ w on an Explicit-mode mesh, result P('X','Y'): resolve the ambiguous "
                 "output sharding without gathering x or w.",
            args=(Arg("x", ("B", "D"), ("X", "Y")), Arg("w", ("D", "F"), ("Y", None))),
            result=Arg("out", ("B", "F"), ("X", "Y")),
            # One rule, so that an all-gather is reported once.
            rules=(AllOf((OnlyKinds(("all-reduce", "reduce-scatter"),
                                   why="Each device can multiply the pieces it holds; reduce the "
                                       "partial products (out_sharding= on the matmul) instead of "
                                       "resharding an input (no all-gather)."),
                         # A psum of zero-padded shards of x or w gathers them all the same.
                         MaxTotalBytes(lambda s: s["B"] // s["nX"] * s["F"] * 4,
                                       what="one reduction of a device's [B/nX, F] partial product: a "
                                            "psum of zero-padded shards of x or w is an all-gather by "
                                            "another name", kinds=("all-reduce", "reduce-scatter")))),),
            reference=matmul,
            inputs=lambda case, rng: normal_inputs(case, rng, [("B", "D"), ("D", "F")]),
            visible_case=Case(mesh=(2, 4), sizes={"B": 8, "D": 16, "F": 8}),
        ),
    ),
)
