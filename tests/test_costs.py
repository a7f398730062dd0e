"""The cost model against prices worked out by hand from the book (Parts 2, 3 and 12), and
its predictions of the book's Part 10 measurements."""
import os
import subprocess
import sys

import pytest

from assignments.costs import (
    CHIPS, HOP_SECONDS, Slice, axis_links, collective_seconds, communication, communication_seconds, cube_slice,
    estimate, hops,
    pipelined_seconds, price, program_seconds, slice_for, with_trip_counts,
)
from assignments.hlo import ArrayShape, Collective, Event, ProgramAnalysis, Stage

V5E = CHIPS["TPU v5e"]
MIB = ArrayShape("f32", (512, 512))        # 1 MiB = 1,048,576 bytes
M = 2**20
TPUS = ("TPU v4", "TPU v5e", "TPU v5p", "TPU v6e")
# One-way ICI bandwidth per link, from the book's Part 2 table, bytes/s.
W = {"TPU v4": 4.5e10, "TPU v5e": 4.5e10, "TPU v5p": 9e10, "TPU v6e": 9e10, "H100": 4.5e11}


def coll(kind, n=4, operands=(MIB,), results=None, count=1, shifts=(), accelerator_kind=""):
    return Collective(kind, ("Y",), tuple(operands), tuple(results or operands), count, n, shifts,
                      accelerator_kind=accelerator_kind)


def on(chip, n, topology):
    """A slice whose Y axis of n devices is a ring, a line or a switch."""
    c = CHIPS[chip]
    links = axis_links(c, "Y", n, wraparound=(topology == "ring")) if topology != "switch" else axis_links(c, "Y", n)
    assert links.topology == topology
    return Slice(c, (links,))


# Every collective kind on a 4-device axis: (collective, bytes each device sends,
# bytes on the busiest link direction as ring, line).  V = the whole array one device holds.
GATHERED = ArrayShape("f32", (512, 2048))  # the 4 MiB result of gathering 1 MiB blocks over 4
CASES = {
    # all-gather, V = 4 MiB result: each device sends 3 of the 4 blocks, 3 MiB.
    #   ring: half of them each way, 1.5 MiB per link direction; line: the end link carries 3 MiB.
    "all-gather": (coll("all-gather", results=(GATHERED,)), 3 * M, 1.5 * M, 3 * M),
    # reduce-scatter of a 1 MiB operand: 3/4 of it leaves each device, 0.75 MiB; half each way on a ring.
    "reduce-scatter": (coll("reduce-scatter", results=(ArrayShape("f32", (512, 128)),)), 0.75 * M, 0.375 * M, 0.75 * M),
    # all-reduce of 1 MiB = reduce-scatter + all-gather: 2 x 3/4 MiB = 1.5 MiB; ring 0.75 MiB a direction.
    "all-reduce": (coll("all-reduce"), 1.5 * M, 0.75 * M, 1.5 * M),
    # all-to-all of a 1 MiB operand over 4: 3 quarters leave each device (0.75 MiB). The middle of
    #   the axis is crossed by 2 x 2 = 4 quarters each way = 1 MiB (line); a ring has two cuts: 0.5 MiB,
    #   which is the book's V / (4 W_ici) with V = 4 MiB (the whole array) and W_ici = 2 W: 4 MiB / 8.
    "all-to-all": (coll("all-to-all"), 0.75 * M, 0.5 * M, 1 * M),
    # one ring step j -> j+1 of 1 MiB: one block per link direction, on a ring and on a line (the
    #   wrapped pair n-1 -> 0 crosses every link the other way, but only once).
    "permute +1": (coll("collective-permute", shifts=(1,)), 1 * M, 1 * M, 1 * M),
    "permute -1": (coll("collective-permute", shifts=(3,)), 1 * M, 1 * M, 1 * M),
    # two places on: two hops on a ring (2 MiB on each link direction, half each way when n = 4:
    #   1 MiB); on a line pairs 0->2, 1->3 go right over link 1-2 (2 blocks), 2->0, 3->1 left (2 blocks).
    "permute +2": (coll("collective-permute", shifts=(2,)), 1 * M, 1 * M, 2 * M),
}


@pytest.mark.parametrize("chip", TPUS)
@pytest.mark.parametrize("topology", ("ring", "line"))
@pytest.mark.parametrize("kind", list(CASES))
def test_each_collective_on_ring_and_line(chip, topology, kind):
    """Does each collective cost its hand-computed bytes / one-way link bandwidth, on every TPU?"""
    c, sent, ring_link, line_link = CASES[kind]
    link = ring_link if topology == "ring" else line_link
    p = price(c, on(chip, 4, topology))
    assert p.sent_bytes == pytest.approx(sent)
    assert p.link_bytes == pytest.approx(link)
    assert p.seconds == pytest.approx(link / W[chip])


# The H100: 8 GPUs on one NVLink switch, 450 GB/s out of each GPU: everything a GPU sends
# goes through its own port, so the time is the bytes it sends / 4.5e11.
@pytest.mark.parametrize("kind", list(CASES))
def test_each_collective_on_an_nvlink_switch(kind):
    c, sent, _, _ = CASES[kind]
    p = price(c, on("H100", 4, "switch"))
    assert p.sent_bytes == pytest.approx(sent)
    assert p.link_bytes == pytest.approx(sent)
    assert p.seconds == pytest.approx(sent / 4.5e11)


def test_the_book_numbers_in_the_issue():
    """An 8 MiB all-to-all over 2 devices: the book's rule V / (4 W_ici), V the whole 16 MiB,
    W_ici = 9e10 bidirectional on a v5e: 16 MiB / 3.6e11 = 46.6 us on a ring; on a 2-chip line
    (a v5e's 2-chip axis) the one link carries 4 MiB each way: 4 MiB / 4.5e10 = 93.2 us."""
    a2a = coll("all-to-all", n=2, operands=(ArrayShape("f32", (2048, 1024)),))
    assert price(a2a, on("TPU v5e", 2, "ring")).seconds == pytest.approx(16 * M / 3.6e11)
    assert price(a2a, on("TPU v5e", 2, "line")).seconds == pytest.approx(4 * M / 4.5e10)
    assert 46e-6 < 16 * M / 3.6e11 < 47e-6


def test_slices_follow_the_book():
    """v5e/v6e: wraparound only on a full 16-chip axis; v4/v5p: only in slices of full 4x4x4
    cubes (the book's Part 2: "a 2x2x4 won't have any wraparounds"), so a v5p mesh of 8 or 32
    devices lies on lines (issue 52: the kit called Y of a 2x4 v5p a ring, and no 2x4 v5p slice
    exists); H100: a switch."""
    topo = lambda chip, shape: [a.topology for a in slice_for(chip, shape, ("X", "Y")).axes]  # noqa: E731
    assert topo("TPU v5e", (2, 4)) == ["line", "line"]
    assert topo("TPU v6e", (16, 16)) == ["ring", "ring"]
    assert topo("TPU v5e", (8, 16)) == ["line", "ring"]
    assert topo("TPU v5p", (2, 4)) == ["line", "line"]
    assert topo("TPU v4", (4, 8)) == ["line", "line"]
    assert topo("TPU v4", (4, 16)) == ["ring", "ring"]          # 64 chips: one full cube
    assert topo("TPU v5p", (2, 32)) == ["line", "ring"]         # two cubes; a 2-chip axis is a line
    # A 2x4 mesh inside one full cube, Y on one of its 4-chip axes: the cube's wraparound makes Y a ring.
    inside = cube_slice("TPU v5p", (2, 4), ("X", "Y"), ring="Y")
    assert [a.topology for a in inside.axes] == ["line", "ring"]
    assert "inside a 4x4x4 cube" in inside.describe() and "wraparound" in inside.axis("Y").why
    with pytest.raises(ValueError):
        cube_slice("TPU v5e", (2, 4), ("X", "Y"), ring="Y")
    with pytest.raises(ValueError):
        cube_slice("TPU v5p", (2, 8), ("X", "Y"), ring="Y")
    assert topo("H100", (2, 4)) == ["switch", "switch"]
    with pytest.raises(ValueError):
        slice_for("H100", (4, 4), ("X", "Y"))
    assert "Y = 4 chips, line" in slice_for("TPU v5e", (2, 4), ("X", "Y")).describe()


def test_small_collectives_are_latency_bound():
    """The book's Part 3 ("A note on ICI latency"): a hop takes about 1 us whatever its bytes, a
    hop's time is max(1 us, its bytes / W), so a small collective costs its hops (issue 52: an
    8-byte all-reduce cost 0.2 ns of link time)."""
    assert HOP_SECONDS == 1e-6
    # The book's Part 3 question 3: gathering 64 bytes per device over a 4-chip axis with a
    # wraparound (a full cube's axis): "the full gather in only 2 hops, so roughly 2us".
    tiny = ArrayShape("bf16", (32,))
    gather = coll("all-gather", operands=(tiny,), results=(ArrayShape("bf16", (128,)),))
    p = price(gather, on("TPU v4", 4, "ring"))
    assert p.hops == 2 and p.seconds == pytest.approx(2e-6) and p.latency_bound
    # Its worked example on a 4-chip v5e axis (a line): 32 kB shards, 0.7 us a hop of bytes,
    # "since we have 3 hops, this will take roughly 3 * 1us = 3us".
    shard = ArrayShape("bf16", (64, 256))
    p = price(coll("all-gather", operands=(shard,), results=(ArrayShape("bf16", (256, 256)),)), on("TPU v5e", 4, "line"))
    assert p.hops == 3 and p.seconds == pytest.approx(3e-6) and p.latency_bound
    # An 8-byte all-reduce over a line of 2: a reduce-scatter and an all-gather, one hop each.
    ar = coll("all-reduce", n=2, operands=(ArrayShape("f32", (2,)),))
    assert price(ar, on("TPU v5e", 2, "line")).seconds == pytest.approx(2e-6)
    # A ring step on a line: the wrapped pair crosses all 3 links; on a ring, one hop.
    step = coll("collective-permute", operands=(ArrayShape("f32", (16,)),), shifts=(1,))
    assert price(step, on("TPU v5e", 4, "line")).seconds == pytest.approx(3e-6)
    assert price(step, on("TPU v5e", 4, "ring")).seconds == pytest.approx(1e-6)
    assert [hops("collective-permute", "line", 4, k) for k in (1, 2, 3)] == [3, 2, 3]
    assert [hops("all-to-all", "ring", n) for n in (2, 3, 4, 8)] == [1, 1, 2, 4]
    # An NVLink switch: no latency priced.
    assert price(ar, on("H100", 2, "switch")).seconds == pytest.approx(8 / 4.5e11)   # 2 x 1/2 x 8 bytes
    # Large collectives stay bandwidth-bound: the 1 MiB cases above are priced by their bytes.
    assert not price(CASES["all-gather"][0], on("TPU v5e", 4, "line")).latency_bound


def test_cpu_reduce_scatter_is_priced_as_one():
    """XLA:CPU's all-reduce + dynamic-slice of an [512, 2048] f32 (4 MiB) operand over a line of
    4: the reduce-scatter's 3/4 x 4 MiB = 3 MiB on the end link, 3 MiB / 4.5e10 = 69.9 us, not
    the all-reduce's twice that."""
    ar = coll("all-reduce", operands=(GATHERED,), accelerator_kind="reduce-scatter")
    p = price(ar, on("TPU v5e", 4, "line"))
    assert p.kind == "reduce-scatter" and "dynamic-slice" in p.note
    assert p.seconds == pytest.approx(3 * M / 4.5e10)
    assert p.sent_bytes == pytest.approx(3 * M)


def test_opposite_permutes_overlap_on_a_ring_only():
    """Three steps each way of half-blocks (0.5 MiB): on a ring each direction carries 3 x 0.5 MiB
    = 1.5 MiB, half the one-way ring's 3 MiB. On a line the wrapped pair of each ring crosses every
    link the other way, so each direction carries 3 x (0.5 + 0.5) MiB = 3 MiB: no gain."""
    half = ArrayShape("f32", (512, 256))
    one_way = ProgramAnalysis((coll("collective-permute", count=3, shifts=(1,)),), (), None, 8,
                              mesh_shape=(2, 4), axis_names=("X", "Y"))
    two_way = ProgramAnalysis((coll("collective-permute", operands=(half,), count=3, shifts=(1,)),
                               coll("collective-permute", operands=(half,), count=3, shifts=(3,))), (), None, 8,
                              mesh_shape=(2, 4), axis_names=("X", "Y"))
    ring = Slice(V5E, (axis_links(V5E, "X", 2), axis_links(V5E, "Y", 4, wraparound=True)))
    line = slice_for(V5E, (2, 4), ("X", "Y"))
    assert communication_seconds(one_way, ring) == pytest.approx(3 * M / 4.5e10)
    assert communication_seconds(two_way, ring) == pytest.approx(1.5 * M / 4.5e10)
    assert communication_seconds(one_way, line) == pytest.approx(3 * M / 4.5e10)
    assert communication_seconds(two_way, line) == pytest.approx(3 * M / 4.5e10)
    # Both send 3 MiB per device in all.
    assert communication(one_way, line)[1] == communication(two_way, line)[1] == pytest.approx(3 * M)
    # On an H100's switch both directions leave through the same port: 3 MiB / 4.5e11.
    h100 = slice_for("H100", (2, 4), ("X", "Y"))
    assert communication_seconds(two_way, h100) == pytest.approx(3 * M / 4.5e11)


def test_a_loop_of_unknown_trip_count_runs_as_often_as_its_collectives_were_counted():
    """A while_loop whose trip count the compiler does not know (problem2's all-to-all rounds)
    is a stage of `runs` None. When the caller counts its rounds (sets the collectives' count,
    5 here), the estimated time runs the loop 5 times, as the communication column counts its
    collectives 5 times: never less than the program's own communication (it was 1 run before)."""
    loop = ProgramAnalysis((coll("all-reduce", count=None),), (), None, 8, mesh_shape=(2, 4), axis_names=("X", "Y"),
                           stages=(Stage((Event(collective=0),), None, "while.1"),))
    line = slice_for(V5E, (2, 4), ("X", "Y"))
    one_run = 1.5 * M / 4.5e10                     # an all-reduce of 1 MiB on a line of 4
    assert program_seconds(loop, line) == pytest.approx(one_run)           # not counted: one run, said so
    counted = ProgramAnalysis((coll("all-reduce", count=5),), (), None, 8, mesh_shape=(2, 4), axis_names=("X", "Y"),
                              stages=loop.stages)
    assert with_trip_counts(counted).stages[0].runs == 5
    assert communication_seconds(counted, line) == pytest.approx(5 * one_run)
    assert program_seconds(counted, line) == pytest.approx(5 * one_run)
    assert program_seconds(counted, line) >= communication_seconds(counted, line) - 1e-12


def test_collective_seconds_on_a_bare_chip_uses_the_books_rule():
    """Without a slice, a 4-device axis is a line on a v5e and on a v5p too (a slice of 4 chips
    has no wraparound); on a full cube's 4-chip axis a v5p's is a ring."""
    ag = coll("all-gather", results=(GATHERED,))
    assert collective_seconds(ag, V5E) == pytest.approx(3 * M / 4.5e10)
    assert collective_seconds(ag, "TPU v5p") == pytest.approx(3 * M / 9e10)
    assert collective_seconds(ag, cube_slice("TPU v5p", (1, 4), ("X", "Y"), ring="Y")) == pytest.approx(1.5 * M / 9e10)


def test_compute_is_dtype_and_precision_aware():
    """One matmul of 2 x 512 x 2048 x 2048 = 4.29e9 FLOPs per chip: int32 on a v5e takes the
    book's measured 224 us; bf16 4.29e9 / 1.97e14 = 21.8 us; f32 at JAX's default precision is
    one bf16 pass on a TPU (21.8 us), Precision.HIGH 3 passes (65.4 us), HIGHEST 6 (130.8 us);
    named algorithms by their input type and passes."""
    flops = 2 * 512 * 2048 * 2048
    base = dict(collectives=(), largest_values=(), temp_bytes=0, num_devices=8, argument_bytes=0, output_bytes=0,
                mesh_shape=(2, 4), axis_names=("X", "Y"))
    bf16 = flops / 1.97e14
    for dtype, seconds in (("s32", 224e-6), ("bf16", bf16), ("f32", bf16), ("f32/high", 3 * bf16),
                           ("f32/highest", 6 * bf16), ("f32/dot_bf16_bf16_f32", bf16),
                           ("f32/dot_bf16_bf16_f32_x3", 3 * bf16), ("f32/dot_bf16_bf16_f32_x6", 6 * bf16),
                           ("f32/dot_f32_f32_f32", 6 * bf16)):
        e = estimate(ProgramAnalysis(**base, dot_flops=((dtype, float(flops)),)), "TPU v5e")
        assert e.compute_s == pytest.approx(seconds, rel=1e-6), dtype
    # Memory-bound: no FLOPs, 81 MB in and out: 81e6 / 8.1e11 = 100 us.
    e = estimate(ProgramAnalysis(**{**base, "argument_bytes": 40_500_000, "output_bytes": 40_500_000},
                                 dot_flops=()), "TPU v5e")
    assert e.compute_s == pytest.approx(100e-6)


def test_an_h100_runs_default_f32_on_tf32_tensor_cores():
    """JAX's default and HIGH precision use TF32 on an H100 (495 TFLOP/s dense), HIGHEST true
    float32 (67 TFLOP/s)."""
    h100 = CHIPS["H100"]
    assert h100.peak("f32") == h100.peak("f32/high") == h100.peak("f32/dot_tf32_tf32_f32") == 4.95e14
    assert h100.peak("f32/highest") == 6.7e13
    assert "TF32" in h100.precision_text("f32") and "HIGHEST" in h100.precision_text("f32/highest")


def test_the_compiled_program_says_which_precision_a_dot_asks_for():
    """Is each dot's precision read from the HLO text (none, operand_precision, algorithm), the
    higher operand's level winning?"""
    from assignments.hlo import matmul_type

    dot = "lhs_contracting_dims={1}, rhs_contracting_dims={0}"
    assert matmul_type("f32", dot) == "f32"
    assert matmul_type("f32", dot + ", operand_precision={highest,highest}") == "f32/highest"
    assert matmul_type("f32", dot + ", operand_precision={default,high}") == "f32/high"
    assert matmul_type("f32", dot + ", algorithm=dot_bf16_bf16_f32_x3") == "f32/dot_bf16_bf16_f32_x3"
    assert matmul_type("bf16", dot) == "bf16"


def test_tables_say_which_precision_they_priced():
    """Does the comparison table's caption name the precision of the program's matmuls?"""
    from assignments.costs import comparison_table
    from assignments.display import to_text

    flops = 2 * 512 * 2048 * 2048
    base = dict(collectives=(), largest_values=(), temp_bytes=0, num_devices=8, argument_bytes=0, output_bytes=0,
                mesh_shape=(2, 4), axis_names=("X", "Y"))
    text = to_text(comparison_table({"a": ProgramAnalysis(**base, dot_flops=(("f32", float(flops)),)),
                                     "b": ProgramAnalysis(**base, dot_flops=(("f32/highest", float(flops)),))}))
    assert "matmuls of a: f32 at JAX's default precision: 1 bf16 pass, 1.97e+14 FLOP/s" in text
    assert "matmuls of b: f32 at Precision.HIGHEST: 6 bf16 passes, 3.28e+13 FLOP/s" in text


def test_table_cells_never_split_a_word_or_a_number():
    """In a notebook, do the estimate table's numbers stay on one line and its names break only
    between words, with a table too wide for the window scrolling instead?"""
    from assignments.costs import comparison_table
    from assignments.display import table_html

    base = dict(collectives=(), largest_values=(), temp_bytes=0, num_devices=8, argument_bytes=0, output_bytes=0,
                mesh_shape=(2, 4), axis_names=("X", "Y"), dot_flops=(("f32", 1e9),))
    html = table_html(comparison_table({"allgather_matmul": ProgramAnalysis(**base)}))
    cells = html.split("<td")[1:]
    assert all("overflow-wrap:normal" in c and "word-break:normal" in c for c in cells)
    assert all("white-space:nowrap" in c for c in cells if "text-align:right" in c)
    assert "overflow-x:auto" in html


def test_pipelined_schedule():
    """Is a ring compute-bound when each step's matmul outlasts a permute, link-bound otherwise?"""
    assert pipelined_seconds(224e-6, 70e-6, steps=4) == pytest.approx(224e-6)
    assert pipelined_seconds(40e-6, 90e-6, steps=4) == pytest.approx(90e-6 + 10e-6)
    assert pipelined_seconds(5e-6, 1e-6, steps=1) == 5e-6


def test_book_benchmark_within_a_tenth():
    """Plain jax.jit 224 us + the all-gather of A over Y (a line of 4 v5e chips: 3/4 of the 4 MiB
    gathered block on the end link, 3 MiB / 4.5e10 = 69.9 us) = 293.9 us against the book's 311 us;
    the collective matmul: 4 steps of 56 us, each hiding a 1 MiB permute (23.3 us): 224 us against
    244 us; the speed-up 1.31x against 1.27x."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
    from book_collective_matmul import BOOK, predictions

    p = predictions()["predicted"]
    assert p["plain jax.jit"] == pytest.approx(224e-6 + 3 * M / 4.5e10)
    assert p["collective matmul"] == pytest.approx(224e-6)
    for name in ("plain jax.jit", "collective matmul"):
        assert 0.9 <= p[name] / BOOK[name] <= 1.1
    speedup = p["plain jax.jit"] / p["collective matmul"]
    assert 0.9 <= speedup / (311 / 244) <= 1.1


@pytest.mark.slow
def test_book_benchmark_prints_one_line_per_program(repo_root):
    out = subprocess.run([sys.executable, os.path.join(repo_root, "benchmarks", "book_collective_matmul.py")],
                         capture_output=True, text=True, check=True, cwd=repo_root).stdout
    assert "Y = 4 chips, line" in out
    ratios = {line[:24].strip(): float(line.split()[-1])
              for line in out.splitlines() if line.startswith(("plain jax.jit", "collective matmul"))}
    assert set(ratios) == {"plain jax.jit", "collective matmul"}, out
    assert all(0.9 <= r <= 1.1 for r in ratios.values()), out


def test_communication_is_priced_step_by_step():
    """problem4's `phases_one_way_each` (tests/submissions/problem4) sends as many bytes each way
    as the solution over the whole program, but every step of both phases one way only. Priced
    step by step, as the timeline runs them, its communication on a v5p (Y on a full cube's
    4-chip axis, a ring) is twice the
    solution's, which halves every step over both directions; pooled over the whole axis, the two
    came out equal while their estimated times did not. Neither estimate is below its own
    communication."""
    import functools
    import importlib.util

    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P

    import assignments
    from solutions.problem4 import allreduce_matmul_bidirectional as solution

    path = os.path.join(os.path.dirname(__file__), "submissions", "problem4", "phases_one_way_each.py")
    spec = importlib.util.spec_from_file_location("phases_one_way_each", path)
    one_way_each = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(one_way_each)
    mesh = assignments.make_mesh((2, 4))
    a = lambda shape, s: jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, P(*s)))  # noqa: E731
    args = (a((1024, 2048), ("X", "Y")), a((2048, 8192), ("Y", None)))
    v5p = cube_slice("TPU v5p", (2, 4), ("X", "Y"), ring="Y")
    runs = {name: assignments.analyze(jax.jit(functools.partial(fn, mesh=mesh)).lower(*args).compile(), mesh)
            for name, fn in (("solution", solution), ("one way each", one_way_each.allreduce_matmul_bidirectional))}
    est = {name: estimate(x, v5p) for name, x in runs.items()}
    assert est["one way each"].comm_bytes == pytest.approx(est["solution"].comm_bytes)
    assert est["one way each"].comm_s == pytest.approx(2 * est["solution"].comm_s)
    assert est["one way each"].link_bytes == pytest.approx(2 * est["solution"].link_bytes)
    for name, x in runs.items():
        assert program_seconds(x, v5p) >= est[name].comm_s


def test_fsdp_step_sends_what_data_parallelism_sends():
    """training's lesson (the book's Part 5): sharding the weights costs no extra communication.
    On an FSDP axis of 8, the shard_map step's gathers and reduce-scatters send per device what
    data parallelism's all-reduce of the gradients sends, 2(N-1)/N of the parameters' bytes; that
    stays the same as the batch grows eightfold, while the matmul time grows eightfold."""
    import functools

    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P

    import assignments
    from assignments.contracts.training import dp_train_step
    from solutions.training import fsdp_train_step

    mesh = assignments.make_mesh((8, 1))
    D, H = 256, 1024

    def run(fn, split, rows):
        a = lambda shape, s: jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, P(*s)))  # noqa: E731
        w = ("X", None) if split else ()
        args = (a((D, H), w), a((H, D), w), a((8 * rows, D), ("X", None)), a((8 * rows, D), ("X", None)))
        step = jax.jit(functools.partial(fn, mesh=mesh, lr=0.1))
        return estimate(assignments.analyze(step.lower(*args).compile(), mesh), "TPU v5e")

    dp, fsdp, fsdp8 = run(dp_train_step, False, 64), run(fsdp_train_step, True, 64), run(fsdp_train_step, True, 512)
    params = 2 * D * H * 4
    assert dp.comm_bytes == pytest.approx(fsdp.comm_bytes) == pytest.approx(2 * 7 / 8 * params)
    assert fsdp8.comm_bytes == fsdp.comm_bytes and fsdp8.comm_s == pytest.approx(fsdp.comm_s)
    assert fsdp8.matmul_s == pytest.approx(8 * fsdp.matmul_s)
