"""The HLO analysis: collectives, mesh axes, bytes, loop trip counts and value sizes."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

from assignments.hlo import analyze, analyze_text

MESH_SHAPE, AXES = (2, 4), ("X", "Y")

ASYNC_AND_TUPLE = """
HloModule m

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%body (p: (s32[], f32[8,4])) -> (s32[], f32[8,4]) {
  %p = (s32[], f32[8,4]{1,0}) parameter(0)
  %x = f32[8,4]{1,0} get-tuple-element(%p), index=1
  %cp = (f32[8,4]{1,0}, f32[8,4]{1,0}) collective-permute-start(f32[8,4]{1,0} %x), channel_id=3, source_target_pairs={{0,1},{1,2},{2,3},{3,0},{4,5},{5,6},{6,7},{7,4}}
  %d = f32[8,4]{1,0} collective-permute-done(%cp)
  %i = s32[] get-tuple-element(%p), index=0
  ROOT %t = (s32[], f32[8,4]{1,0}) tuple(%i, %d)
}

%cond (p: (s32[], f32[8,4])) -> pred[] {
  %p = (s32[], f32[8,4]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %n = s32[] constant(3)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

ENTRY %main (x: f32[8,4], y: f32[8,2]) -> f32[8,4] {
  %x = f32[8,4]{1,0} parameter(0)
  %y = f32[8,2]{1,0} parameter(1)
  %ar = (f32[8,4]{1,0}, f32[8,2]{1,0}) all-reduce(%x, %y), channel_id=1, replica_groups=[4,2]<=[2,4]T(1,0), use_global_device_ids=true, to_apply=%add
  %z = s32[] constant(0)
  %g = f32[8,4]{1,0} get-tuple-element(%ar), index=0
  %t = (s32[], f32[8,4]{1,0}) tuple(%z, %g)
  %w = (s32[], f32[8,4]{1,0}) while(%t), condition=%cond, body=%body, backend_config={"known_trip_count":{"n":"3"}}
  ROOT %r = f32[8,4]{1,0} get-tuple-element(%w), index=1
}
"""


def test_async_permute_in_loop_and_combined_all_reduce():
    """Does the analysis fold async forms, multiply by trip counts and count tuple pieces?"""
    a = analyze_text(ASYNC_AND_TUPLE, MESH_SHAPE, AXES)
    kinds = {c.kind: c for c in a.collectives}
    assert set(kinds) == {"all-reduce", "collective-permute"}
    ar = kinds["all-reduce"]
    assert ar.axes == ("X",) and ar.pieces == 2 and ar.elements == 8 * 4 + 8 * 2 and ar.count == 1
    cp = kinds["collective-permute"]
    assert cp.axes == ("Y",) and cp.count == 3 and cp.shifts == (1,) and cp.bytes == 8 * 4 * 4
    assert a.total_bytes == ar.bytes + 3 * cp.bytes


def compile_on(mesh, fn, *arrays_and_specs):
    args = [jax.device_put(a, NamedSharding(mesh, s)) for a, s in arrays_and_specs]
    return analyze(jax.jit(fn).lower(*args).compile(), mesh)


def ring_matmul(mesh, unroll, direction):
    def body(lhs, rhs):
        n = jax.lax.axis_size("Y")
        perm = [(j, (j + direction) % n) for j in range(n)]

        def step(i, carry):
            acc, l = carry
            return acc + l @ rhs[: l.shape[1]], jax.lax.ppermute(l, "Y", perm)

        acc = jax.lax.pcast(jnp.zeros((lhs.shape[0], rhs.shape[1]), lhs.dtype), ("X", "Y"), to="varying")
        acc, l = jax.lax.fori_loop(0, n - 1, step, (acc, lhs), unroll=unroll)
        return acc + l  # use the last permute, so XLA cannot drop it

    return jax.shard_map(body, mesh=mesh, in_specs=(P("X", "Y"), P(None, "Y")), out_specs=P("X", "Y"))


@pytest.mark.parametrize("unroll", [False, True])
@pytest.mark.parametrize("direction", [1, -1])
def test_ring_loop_counts_and_direction(mesh_2x4, unroll, direction):
    """Are a rolled and an unrolled ring judged alike, with the ring direction read right?"""
    x = np.ones((16, 16), np.float32)
    a = compile_on(mesh_2x4, ring_matmul(mesh_2x4, unroll, direction),
                   (x, P("X", "Y")), (x, P(None, "Y")))
    permutes = a.of_kind("collective-permute")
    assert sum(c.count for c in permutes) == 3          # nY - 1 steps
    assert all(c.axes == ("Y",) and c.operands[0].dims == (8, 4) for c in permutes)
    assert {s for c in permutes for s in c.shifts} == {direction % 4}


def test_psum_axes_and_sizes(mesh_2x4):
    """Is a psum over Y of a [2, 3] block one all-reduce over Y of 6 elements?"""
    f = jax.shard_map(lambda b: jax.lax.psum(b[:2, :3], "Y"), mesh=mesh_2x4,
                      in_specs=P("X", "Y"), out_specs=P("X", None))
    a = compile_on(mesh_2x4, f, (np.ones((8, 24), np.float32), P("X", "Y")))
    (c,) = a.collectives
    assert (c.kind, c.axes, c.elements, c.bytes, c.count, c.group_size) == ("all-reduce", ("Y",), 6, 24, 1, 4)


def test_no_communication_and_largest_values(mesh_2x4):
    """Does shard-local work show no collective, and are value sizes per device?"""
    f = jax.shard_map(lambda b: jnp.outer(b[:, 0], b[:, 0]), mesh=mesh_2x4,
                      in_specs=P("X", "Y"), out_specs=P("X", "Y"))
    a = compile_on(mesh_2x4, f, (np.ones((64, 8), np.float32), P("X", "Y")))
    assert a.collectives == ()
    assert a.largest_values[0].shape.dims == (32, 32)
    assert a.values_at_least(32 * 32) and not a.values_at_least(32 * 32 + 1)


def test_an_all_to_all_is_one_value_and_a_combined_all_reduce_is_not(mesh_2x4):
    """XLA:CPU passes a jax.lax.all_to_all's array as one block per device of the group: is the
    array the program sent (their concatenation) one value, so that a round of [2, 16, 4] is not
    read as two [1, 16, 4] blocks? And do separate psums that XLA combined into one tuple
    all-reduce stay separate values?"""
    f = jax.shard_map(lambda b: jax.lax.all_to_all(b.reshape(2, 16, 4), "X", 0, 0), mesh=mesh_2x4,
                      in_specs=P("X", "Y"), out_specs=P("X", "Y"))
    a = compile_on(mesh_2x4, f, (np.ones((64, 16), np.float32), P("X", "Y")))
    sent = [v for v in a.largest_values if v.opcode == "all-to-all"]
    assert [v.shape.dims for v in sent] == [(2, 16, 4)], a.largest_values
    text = ASYNC_AND_TUPLE.replace("replica_groups=[4,2]<=[2,4]T(1,0)", "replica_groups={{0,4},{1,5},{2,6},{3,7}}")
    pieces = {v.shape.dims for v in analyze_text(text, MESH_SHAPE, AXES).largest_values if v.opcode == "all-reduce"}
    assert pieces == {(8, 4), (8, 2)}


def test_all_to_alls_in_flight_together_are_one_round(mesh_2x4):
    """Two all_to_alls that send the halves of one [2, 16, 8] round along its last dimension,
    neither computed from the other: one value of [2, 16, 8], as the round would be; pieces of
    other shapes sent together are one float32 value as large as both. A second all_to_all
    computed from the first (results sent back after a product) stays a value of its own."""
    def halves(b):
        r = b.reshape(2, 16, 8)
        return jnp.concatenate([jax.lax.all_to_all(r[..., :4], "X", 0, 0),
                                jax.lax.all_to_all(r[..., 4:], "X", 0, 0)], axis=-1).reshape(b.shape)

    def there_and_back(b):
        got = jax.lax.all_to_all(b.reshape(2, 16, 4), "X", 0, 0)
        return jax.lax.all_to_all(jnp.tanh(got) * 2, "X", 0, 0).reshape(b.shape)

    def another_shape(b):
        r = b.reshape(2, 16, 4)
        return (jax.lax.all_to_all(r, "X", 0, 0).reshape(b.shape)
                + jax.lax.all_to_all(r.reshape(2, 8, 8), "X", 0, 0).reshape(b.shape))

    shapes = {}
    for name, body, rows in (("halves", halves, 32), ("there_and_back", there_and_back, 16),
                             ("another_shape", another_shape, 16)):
        f = jax.shard_map(body, mesh=mesh_2x4, in_specs=P("X", "Y"), out_specs=P("X", "Y"))
        a = compile_on(mesh_2x4, f, (np.ones((2 * rows, 32), np.float32), P("X", "Y")))
        shapes[name] = sorted(v.shape.dims for v in a.largest_values if v.opcode == "all-to-all")
    assert (2, 16, 8) in shapes["halves"], shapes
    assert shapes["there_and_back"] == [(2, 16, 4), (2, 16, 4)], shapes
    assert shapes["another_shape"] == [(2, 8, 8), (2, 16, 4), (256,)], shapes


def test_trivial_axis_is_not_communication():
    """Is a psum over an axis of size 1 left out (nothing moves)?"""
    mesh = jax.make_mesh((8, 1), AXES, axis_types=(jax.sharding.AxisType.Auto,) * 2)
    f = jax.shard_map(lambda b: jax.lax.psum(b, "Y"), mesh=mesh, in_specs=P("X", "Y"), out_specs=P("X", "Y"))
    a = compile_on(mesh, f, (np.ones((8, 8), np.float32), P("X", "Y")))
    assert a.collectives == ()


UNEVEN = """HloModule m

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main (x: f32[16,8]) -> f32[16,8] {
  %x = f32[16,8]{1,0} parameter(0)
  ROOT %ar = f32[16,8]{1,0} all-reduce(%x), channel_id=1, replica_groups={{0},{1,2,3,4,5,6,7}}, use_global_device_ids=true, to_apply=%add
}
"""


def test_a_conditional_counts_the_branch_that_ran(mesh_2x4):
    """lax.cond with a psum in each branch runs one of them: unknown from the compiled program
    (the data chooses), then counted by running it: one all-reduce in all, not one per branch,
    and the branch that never ran left out (it moves nothing, so no rule may find it there)."""
    from assignments.evaluate import count_when_run

    def body(x, flag):
        return jax.lax.cond(flag[0] > 0, lambda v: jax.lax.psum(v, "Y"), lambda v: -jax.lax.psum(-v, "Y"), x)

    f = jax.jit(jax.shard_map(body, mesh=mesh_2x4, in_specs=(P("X", "Y"), P()), out_specs=P("X", None)))
    x = jax.device_put(np.ones((8, 8), np.float32), NamedSharding(mesh_2x4, P("X", "Y")))
    flag = jax.device_put(np.array([1], np.int32), NamedSharding(mesh_2x4, P()))
    compiled = f.lower(x, flag).compile()
    analysis = analyze(compiled, mesh_2x4)
    assert [c.count for c in analysis.of_kind("all-reduce")] == [None, None]
    counted = count_when_run(compiled, (x, flag), analysis)
    assert [c.count for c in counted.of_kind("all-reduce")] == [1]


LEFT, RIGHT = "{{0,3},{1,0},{2,1},{3,2}}", "{{0,1},{1,2},{2,3},{3,0}}"
RINGS_IN_A_BRANCH = f"""
HloModule m

%rings (p: (f32[4,2], f32[4,2])) -> (f32[4,2], f32[4,2]) {{
  %p = (f32[4,2]{{1,0}}, f32[4,2]{{1,0}}) parameter(0)
  %lo = f32[4,2]{{1,0}} get-tuple-element(%p), index=0
  %hi = f32[4,2]{{1,0}} get-tuple-element(%p), index=1
  %a = f32[4,2]{{1,0}} collective-permute(%lo), channel_id=1, source_target_pairs={LEFT}
  %b = f32[4,2]{{1,0}} collective-permute(%hi), channel_id=2, source_target_pairs={LEFT}
  %c = f32[4,2]{{1,0}} collective-permute(%a), channel_id=3, source_target_pairs={RIGHT}
  %d = f32[4,2]{{1,0}} collective-permute(%b), channel_id=4, source_target_pairs={RIGHT}
  ROOT %t = (f32[4,2]{{1,0}}, f32[4,2]{{1,0}}) tuple(%c, %d)
}}

%other (p: (f32[4,2], f32[4,2])) -> (f32[4,2], f32[4,2]) {{
  %p = (f32[4,2]{{1,0}}, f32[4,2]{{1,0}}) parameter(0)
  %lo = f32[4,2]{{1,0}} get-tuple-element(%p), index=0
  %hi = f32[4,2]{{1,0}} get-tuple-element(%p), index=1
  %e = f32[4,2]{{1,0}} collective-permute(%lo), channel_id=5, source_target_pairs={RIGHT}
  ROOT %t = (f32[4,2]{{1,0}}, f32[4,2]{{1,0}}) tuple(%e, %hi)
}}

ENTRY %main (i: s32[], x: f32[4,2], y: f32[4,2]) -> (f32[4,2], f32[4,2]) {{
  %i = s32[] parameter(0)
  %x = f32[4,2]{{1,0}} parameter(1)
  %y = f32[4,2]{{1,0}} parameter(2)
  %t = (f32[4,2]{{1,0}}, f32[4,2]{{1,0}}) tuple(%x, %y)
  ROOT %r = (f32[4,2]{{1,0}}, f32[4,2]{{1,0}}) conditional(%i, %t, %t), branch_computations={{%rings, %other}}
}}
"""


def test_the_steps_inside_a_branch_are_its_own():
    """A branch of a conditional holding two one-way ring steps (both halves -1, then both +1)
    was read as one step, its collectives all needing what the conditional needs: balanced.
    Are they two steps, as outside a branch, the other branch's first permute in the first?"""
    from assignments.rules import ring_steps

    analysis = analyze_text(RINGS_IN_A_BRANCH, (1, 4), AXES)
    [(where, steps)] = ring_steps(analysis, "Y")
    assert where == "straight-line code"
    assert [sorted(p.name for p, _ in step) for step in steps] == [["a", "b", "e"], ["c", "d"]]
    assert [p.directions for p, _ in steps[1]] == [(1,), (1,)]
    assert {p.name: p.computation for p, _ in steps[0]} == {"a": "rings", "b": "rings", "e": "other"}


def test_groups_of_replica_ids_are_read_as_every_device():
    """An all-reduce with a channel but without use_global_device_ids=true names replica ids
    (XLA's cross-replica-and-partition mode): with one replica, {{0}} is every device. JAX
    never writes it; a submission's own lowering rule can. Is it read as moving data over
    every axis, never as nothing?"""
    text = UNEVEN.replace("replica_groups={{0},{1,2,3,4,5,6,7}}, use_global_device_ids=true",
                          "replica_groups={{0}}")
    (c,) = analyze_text(text, MESH_SHAPE, AXES).collectives
    assert (c.kind, c.axes, c.group_size) == ("all-reduce", ("X", "Y"), 8)


def test_groups_of_unequal_sizes_are_read_by_the_largest():
    """A psum with axis_index_groups=[[0], [1, ..., 7]] leaves device 0 alone in the first
    group while the other seven add up their data: is it a collective over X+Y of 7 devices,
    not "nothing moves"? (Every group of one device is still nothing: see above.)"""
    (c,) = analyze_text(UNEVEN, MESH_SHAPE, AXES).collectives
    assert (c.kind, c.axes, c.group_size, c.bytes) == ("all-reduce", ("X", "Y"), 7, 16 * 8 * 4)


def test_run_counts_of_a_data_dependent_loop_are_read_by_running_it(mesh_2x4):
    """A permute in a loop whose trip count is an input: unknown from the compiled program,
    then read from one profiled run (`count_when_run`), per device, whatever the trip count."""
    from assignments.evaluate import count_when_run

    def body(x, n):
        def step(i, v):
            return jax.lax.ppermute(v, "Y", [(j, (j + 1) % 4) for j in range(4)])

        return jax.lax.fori_loop(0, n[0], step, x)

    f = jax.jit(jax.shard_map(body, mesh=mesh_2x4, in_specs=(P("X", "Y"), P()), out_specs=P("X", "Y")))
    x = jax.device_put(np.ones((8, 8), np.float32), NamedSharding(mesh_2x4, P("X", "Y")))
    for trips in (3, 5):
        n = jax.device_put(np.array([trips], np.int32), NamedSharding(mesh_2x4, P()))
        compiled = f.lower(x, n).compile()
        analysis = analyze(compiled, mesh_2x4)
        assert [c.count for c in analysis.of_kind("collective-permute")] == [None]
        counted = count_when_run(compiled, (x, n), analysis)
        assert [c.count for c in counted.of_kind("collective-permute")] == [trips]


def test_a_loop_only_some_devices_run_counts_its_runs_on_them(mesh_2x4):
    """A psum over Y in a loop that only the row X = 0 runs (trips times), the other row not at
    all: counted as trips (what a device that runs it sends), not as the average over all
    devices (trips / 2, or 0 once rounded)."""
    from assignments.evaluate import count_when_run

    def body(x, n):
        trips = jnp.where(jax.lax.axis_index("X") == 0, n[0], 0)
        return jax.lax.fori_loop(0, trips, lambda i, v: jax.lax.psum(v + i, "Y"), x)

    f = jax.jit(jax.shard_map(body, mesh=mesh_2x4, in_specs=(P("X", "Y"), P()), out_specs=P("X", "Y"),
                              check_vma=False))
    x = jax.device_put(np.ones((8, 8), np.float32), NamedSharding(mesh_2x4, P("X", "Y")))
    n = jax.device_put(np.array([3], np.int32), NamedSharding(mesh_2x4, P()))
    compiled = f.lower(x, n).compile()
    analysis = analyze(compiled, mesh_2x4)
    assert [c.count for c in analysis.of_kind("all-reduce")] == [None]
    assert [c.count for c in count_when_run(compiled, (x, n), analysis).of_kind("all-reduce")] == [3]


SCOPED = """HloModule m

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%body (p: f32[32,16,24]) -> f32[32,16,24] {
  %p = f32[32,16,24]{2,1,0} parameter(0)
  ROOT %big = f32[32,16,24]{2,1,0} multiply(%p, %p)
}

ENTRY %main (x: f32[16,8], y: f32[32,16,24]) -> (f32[16,8], f32[32,16,24]) {
  %x = f32[16,8]{1,0} parameter(0)
  %y = f32[32,16,24]{2,1,0} parameter(1)
  %ar = f32[16,8]{1,0} all-reduce(%x), channel_id=1, replica_groups={{0,1,2,3},{4,5,6,7}}, use_global_device_ids=true, to_apply=%add, metadata={op_name="jit(f)/source_target_pairs={}/psum" source_file="a.py" source_line=3}
  %n = s32[] constant(2), metadata={op_name="jit(f)/calls=%body \\"}\\" calls=%body"}, frontend_attributes={note="replica_groups={}"}
  %c = f32[32,16,24]{2,1,0} call(%y), to_apply=%body
  ROOT %t = (f32[16,8]{1,0}, f32[32,16,24]{2,1,0}) tuple(%ar, %c)
}
"""


def test_names_the_author_writes_are_not_read_as_attributes():
    """A `jax.named_scope` lands in each instruction's metadata op_name, and user metadata in
    frontend_attributes: a scope named "source_target_pairs={}" made a psum read as a permute
    moving nothing (and vanish), and one holding "calls=%body" made a loop body read as a
    fusion's (its values unread). Are both blocks left out of the attributes, quoted braces
    and escaped quotes included?"""
    analysis = analyze_text(SCOPED, MESH_SHAPE, AXES)
    [c] = analysis.collectives
    assert (c.kind, c.axes, c.group_size) == ("all-reduce", ("Y",), 4)
    assert "big" in {v.name for v in analysis.largest_values}


@pytest.mark.parametrize("dtype, bytes_each", [("u2", 1 / 4), ("s4", 1 / 2), ("f8e8m0fnu", 1), ("f8e4m3b11fnuz", 1),
                                               ("f4e2m1fn", 1 / 2), ("f9e9m9q", 4)])
def test_every_array_type_counts_by_its_bits(dtype, bytes_each):
    """A collective of a type missing from the reader's table was read with no operand, so
    it moved 0 bytes: problem3's whole partial product went round the ring as 16 u2 digits per
    float and got 3/3. Is every XLA type counted by its bits (sub-byte types packed), and a
    type newer than the table as 4 bytes an element, never as nothing?"""
    text = ASYNC_AND_TUPLE.replace("f32[8,4]", f"{dtype}[8,64]")
    permute = next(c for c in analyze_text(text, MESH_SHAPE, AXES).collectives if c.kind == "collective-permute")
    assert permute.operands[0].dtype == dtype and permute.bytes == 8 * 64 * bytes_each


MATMULS = """HloModule m

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%product (p0: f32[8,16], p1: f32[16,4]) -> f32[8,4] {
  %p0 = f32[8,16]{1,0} parameter(0)
  %p1 = f32[16,4]{1,0} parameter(1)
  %b0 = f32[8,16,4]{2,1,0} broadcast(%p0), dimensions={0,1}
  %b1 = f32[8,16,4]{2,1,0} broadcast(%p1), dimensions={1,2}
  %m = f32[8,16,4]{2,1,0} multiply(%b0, %b1)
  %z = f32[] constant(0)
  ROOT %r = f32[8,4]{1,0} reduce(%m, %z), dimensions={1}, to_apply=%add
}

%stacked (p: f32[6,8,4]) -> f32[8,4] {
  %p = f32[6,8,4]{2,1,0} parameter(0)
  %z = f32[] constant(0)
  ROOT %r = f32[8,4]{1,0} reduce(%p, %z), dimensions={0}, to_apply=%add
}

ENTRY %main (a: f32[8,16], w: f32[16,4], s: f32[6,8,4], v: f32[16,2]) -> (f32[8,2], f32[8,4], f32[8,4]) {
  %a = f32[8,16]{1,0} parameter(0)
  %w = f32[16,4]{1,0} parameter(1)
  %s = f32[6,8,4]{2,1,0} parameter(2)
  %v = f32[16,2]{1,0} parameter(3)
  %d = f32[8,2]{1,0} dot(%a, %v), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %f = f32[8,4]{1,0} fusion(%a, %w), kind=kLoop, calls=%product
  %g = f32[8,4]{1,0} fusion(%s), kind=kLoop, calls=%stacked
  ROOT %t = (f32[8,2]{1,0}, f32[8,4]{1,0}, f32[8,4]{1,0}) tuple(%d, %f, %g)
}
"""


def test_a_matmul_written_as_a_multiply_and_a_sum_is_a_matmul():
    """A collective matmul's whole product written as a broadcast multiply and a sum over the
    contracted dimension (no dot) evaded the one-block-per-step rule. Is the sum of a product
    read as a matmul of its work (2 x 8 x 16 x 4 FLOPs, above the dot's 2 x 8 x 16 x 2), and a sum of
    stacked results (no multiply under it) not?"""
    from assignments.hlo import work_from_text

    _, _, largest = work_from_text(MATMULS)
    assert largest == 2 * 8 * 16 * 4
    # through a negation and a cast on its way to the sum (a split into signs is as much a sum)
    negated = MATMULS.replace("ROOT %r = f32[8,4]{1,0} reduce(%m, %z)",
                              "%n = f32[8,16,4]{2,1,0} negate(%m)\n  %c = f32[8,16,4]{2,1,0} convert(%n)\n"
                              "  ROOT %r = f32[8,4]{1,0} reduce(%c, %z)")
    assert work_from_text(negated)[2] == 2 * 8 * 16 * 4
    _, _, largest = work_from_text(MATMULS.replace("multiply(%b0, %b1)", "add(%b0, %b1)"))
    assert largest == 2 * 8 * 16 * 2


PIECES = MATMULS.split("ENTRY")[0] + """ENTRY %main (a: f32[8,16], v: f32[16,2], w: f32[16,4], c: f32[8,1], r: f32[1,4]) -> (f32[8,2], f32[8,4]) {
  %a = f32[8,16]{1,0} parameter(0)
  %v = f32[16,2]{1,0} parameter(1)
  %w = f32[16,4]{1,0} parameter(2)
  %c = f32[8,1]{1,0} parameter(3)
  %r = f32[1,4]{1,0} parameter(4)
  %d = f32[8,2]{1,0} dot(%a, %v), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %f = f32[8,4]{1,0} fusion(%a, %w), kind=kLoop, calls=%product
  %bc = f32[8,4]{1,0} broadcast(%c), dimensions={0,1}
  %br = f32[8,4]{1,0} broadcast(%r), dimensions={0,1}
  %o = f32[8,4]{1,0} multiply(%bc, %br)
  %k = f32[] constant(2)
  %kb = f32[8,4]{1,0} broadcast(%k), dimensions={}
  %s = f32[8,4]{1,0} multiply(%f, %kb)
  %sum = f32[8,4]{1,0} add(%s, %o)
  ROOT %ar = (f32[8,2]{1,0}, f32[8,4]{1,0}) all-reduce(%d, %sum), channel_id=1, replica_groups=[2,4]<=[8], use_global_device_ids=true, to_apply=%add
}
"""


def test_each_piece_of_a_reduction_knows_the_matmuls_it_is_computed_from():
    """Is each operand of a combined all-reduce charged the matmul work it is computed from,
    each matmul once: a dot (2 x 8 x 16 x 2), a sum of a product in a fusion (2 x 8 x 16 x 4,
    its multiply not counted again), and an outer product XLA writes as a multiply of two
    computed values (2 x 8 x 4), but not a multiply by a constant?"""
    a = analyze_text(PIECES, MESH_SHAPE, AXES)
    (ar,) = a.collectives
    assert ar.axes == ("Y",) and ar.matmul_needs == (2 * 8 * 16 * 2, 2 * 8 * 16 * 4 + 2 * 8 * 4)
    assert type(a).from_json(a.to_json()).collectives[0].matmul_needs == ar.matmul_needs


@pytest.mark.parametrize("wait", [False, True])
def test_a_loop_says_what_each_run_leaves_for_the_next(mesh_2x4, wait):
    """Does a ring loop's stage record what each carried value is computed from, and what each
    event reads of the last run, so that a product the next send waits for (through a zero
    times it, which changes no value) is read as having nothing beside it, and the plain
    ring's products as overlapped?"""
    from assignments.rules import _alone_in_the_loop

    def body(lhs, rhs):
        n = jax.lax.axis_size("Y")

        def step(i, carry):
            acc, l = carry
            acc = acc + l @ rhs[: l.shape[1]]
            if wait:
                l = l + 0.0 * jnp.sum(acc)
            return acc, jax.lax.ppermute(l, "Y", [(j, (j + 1) % n) for j in range(n)])

        acc = jax.lax.pcast(jnp.zeros((lhs.shape[0], rhs.shape[1]), lhs.dtype), ("X", "Y"), to="varying")
        acc, l = jax.lax.fori_loop(0, n - 1, step, (acc, lhs))
        return acc + l @ rhs[: l.shape[1]]

    f = jax.shard_map(body, mesh=mesh_2x4, in_specs=(P("X", "Y"), P(None, "Y")), out_specs=P("X", "Y"))
    a = compile_on(mesh_2x4, f, (np.ones((8, 16), np.float32), P("X", "Y")), (np.ones((16, 8), np.float32), P(None, "Y")))
    (loop,) = [s for s in a.stages if s.loop]
    assert loop.carried and any(e.reads for e in loop.events)
    ring = [i for i, e in enumerate(loop.events) if e.collective >= 0]
    block = sum(e.flops for e in loop.events if e.collective < 0)
    assert block > 0 and _alone_in_the_loop(loop, ring) == (block if wait else 0.0)


def test_a_product_sent_in_its_own_step_runs_beside_the_last_send(mesh_2x4):
    """The book's "permute the result as you accumulate it", rolled: acc = ppermute(acc +
    product). The step's send needs its product, and the next run's send the carried sum, but
    the product needs nothing the last run's send brought: it runs beside that send, as in the
    same loop unrolled. Is it read as overlapped?"""
    from assignments.rules import _alone_in_the_loop

    def body(t, w):
        n, idx = jax.lax.axis_size("Y"), jax.lax.axis_index("Y")
        chunk = w.shape[1] // n

        def step(s, acc):
            acc = acc + t @ jax.lax.dynamic_slice_in_dim(w, ((idx + s + 1) % n) * chunk, chunk, axis=1)
            return jax.lax.ppermute(acc, "Y", [(j, (j - 1) % n) for j in range(n)])

        acc = jax.lax.pcast(jnp.zeros((t.shape[0], chunk), t.dtype), ("X", "Y"), to="varying")
        return jax.lax.fori_loop(0, n - 1, step, acc) + t @ jax.lax.dynamic_slice_in_dim(w, idx * chunk, chunk, axis=1)

    f = jax.shard_map(body, mesh=mesh_2x4, in_specs=(P("X", "Y"), P("Y", None)), out_specs=P("X", "Y"))
    a = compile_on(mesh_2x4, f, (np.ones((8, 16), np.float32), P("X", "Y")), (np.ones((16, 16), np.float32), P("Y", None)))
    (loop,) = [s for s in a.stages if s.loop]
    ring = [i for i, e in enumerate(loop.events) if e.collective >= 0]
    assert any(e.collective < 0 for e in loop.events) and _alone_in_the_loop(loop, ring) == 0.0


MOVED = MATMULS.split("%product")[0] + """ENTRY %main (s: f32[6,8,4], i: s32[], a: f32[6,8,4]) -> (f32[8,4], f32[8,4]) {
  %s = f32[6,8,4]{2,1,0} parameter(0)
  %i = s32[] parameter(1)
  %a = f32[6,8,4]{2,1,0} parameter(2)
  %k = s32[] constant(2)
  %j = s32[] multiply(%i, %k)
  %o = s32[] constant(0)
  %d = f32[3,8,4]{2,1,0} dynamic-slice(%s, %j, %o, %o), dynamic_slice_sizes={3,8,4}
  %z = f32[] constant(0)
  %r = f32[8,4]{1,0} reduce(%d, %z), dimensions={0}, to_apply=%add
  %m = f32[6,8,4]{2,1,0} multiply(%s, %a)
  %f = f32[6,8,4]{2,1,0} reverse(%m), dimensions={0}
  %q = f32[8,4]{1,0} reduce(%f, %z), dimensions={0}, to_apply=%add
  ROOT %t = (f32[8,4]{1,0}, f32[8,4]{1,0}) tuple(%r, %q)
}
"""


def test_a_product_moved_before_its_sum_is_a_product_and_an_index_is_not():
    """Is a product flipped before it is summed still a sum of a product (2 x 6 x 8 x 4), and a
    sum of a slice whose start index is a product (of integers) not one?"""
    from assignments.hlo import work_from_text

    assert work_from_text(MOVED)[2] == 2 * 6 * 8 * 4
    index_only = "\n".join(line for line in MOVED.splitlines() if not line.lstrip().startswith(("%m ", "%f ", "%q ")))
    assert work_from_text(index_only.replace("tuple(%r, %q)", "tuple(%r, %r)"))[2] == 0


OUTER = MATMULS.split("%product")[0] + """ENTRY %main (a: f32[6,8], w: f32[8,4], c: f32[6,4]) -> (f32[6,8,4], f32[6,4]) {
  %a = f32[6,8]{1,0} parameter(0)
  %w = f32[8,4]{1,0} parameter(1)
  %c = f32[6,4]{1,0} parameter(2)
  %ba = f32[6,8,4]{2,1,0} broadcast(%a), dimensions={0,1}
  %bw = f32[6,8,4]{2,1,0} broadcast(%w), dimensions={1,2}
  %tw = f32[6,8,4]{2,1,0} copy(%bw)
  %pairs = f32[6,8,4]{2,1,0} multiply(%ba, %tw)
  %s = f32[] reduce(%c, %z), dimensions={0,1}, to_apply=%add
  %z = f32[] constant(0)
  %bs = f32[6,4]{1,0} broadcast(%s), dimensions={}
  %scaled = f32[6,4]{1,0} multiply(%c, %bs)
  ROOT %t = (f32[6,8,4]{2,1,0}, f32[6,4]{1,0}) tuple(%pairs, %scaled)
}
"""


def test_every_pairwise_product_made_at_once_is_a_matmul_however_it_is_summed():
    """Is a multiply of two broadcast values (`a[:, :, None] * w[None]`, through a copy) one
    matmul's work (2 x 6 x 8 x 4), summed by a reduce or not (a scatter-add, a running sum),
    and a value scaled by a broadcast scalar no matmul?"""
    from assignments.hlo import work_from_text

    assert work_from_text(OUTER)[2] == 2 * 6 * 8 * 4
    scaled_only = OUTER.replace("tuple(%pairs, %scaled)", "tuple(%scaled, %scaled)").replace(
        "  %pairs = f32[6,8,4]{2,1,0} multiply(%ba, %tw)\n", "")
    assert work_from_text(scaled_only)[2] == 0


def test_the_step_model_counts_a_multiply_and_a_sum_as_a_matmul():
    """Block products written as a multiply and a sum (no dot) escaped the ring rules, whose
    matmuls are the step model's. Are the dot (2 x 8 x 16 x 2) and the sum of a product in a
    fusion (2 x 8 x 16 x 4, its multiply not counted again) the step model's matmuls, and the
    sum of stacked results (no product under it) not?"""
    from assignments.steps import stages_from_text

    (stage,) = stages_from_text(MATMULS, ())
    assert sorted(e.flops for e in stage.events) == [2 * 8 * 16 * 2, 2 * 8 * 16 * 4]


def data_bound_loop(mesh):
    """A ring of one permute, then nY block products in a while_loop whose bound the compiler
    cannot know (nY plus isnan of an element: always nY)."""
    def body(lhs, rhs):
        n = jax.lax.axis_size("Y")
        moved = jax.lax.ppermute(lhs, "Y", [(j, (j + 1) % n) for j in range(n)])
        stop = n + jnp.isnan(lhs[0, 0]).astype(jnp.int32)
        k0 = jax.lax.pcast(jnp.int32(0), ("X", "Y"), to="varying")
        acc = jax.lax.pcast(jnp.zeros((lhs.shape[0], rhs.shape[1]), lhs.dtype), ("X", "Y"), to="varying")
        def multiply(c):                  # block k of the product (not loop-invariant, so it stays in the loop)
            k, acc = c
            return k + 1, acc + moved @ jax.lax.dynamic_slice_in_dim(rhs, (k % n) * lhs.shape[1], lhs.shape[1], 0)

        return jax.lax.while_loop(lambda c: c[0] < stop, multiply, (k0, acc))[1]

    return jax.shard_map(body, mesh=mesh, in_specs=(P("X", "Y"), P(None, "Y")), out_specs=P("X", "Y"))


def test_a_loop_that_multiplies_an_unknown_number_of_times_is_a_stage_of_unknown_runs(mesh_2x4):
    """A compute-only loop counted as one run of its body hid every block product but one. Is
    a while_loop with a data-dependent bound that multiplies a stage of its own, run an unknown
    number of times, and does the ring rule refuse to count it, saying to use static bounds?"""
    from assignments.contract import Case
    from assignments.rules import MatmulsInTheRing

    x = np.ones((16, 16), np.float32)
    a = compile_on(mesh_2x4, data_bound_loop(mesh_2x4), (x, P("X", "Y")), (x, P(None, "Y")))
    unknown = [s for s in a.stages if s.runs is None]
    assert unknown and all(any(e.collective < 0 for e in s.events) for s in unknown)
    [message] = MatmulsInTheRing("Y", 2 * 8 * 4 * 4, blocks=2).violations(a, Case((2, 4), {"B": 16}))
    assert message.startswith("the program multiplies inside a loop whose trip count is not known at compile time")
    assert "jax.lax.fori_loop with Python ints" in message


def test_a_piece_made_in_a_loop_is_charged_every_run_of_it(mesh_2x4):
    """The whole product made in a compute-only fori_loop (one rank-1 product per run), then
    psum'd in halves: is each half charged every run of the loop (the whole 2 x 8 x 4 x 16
    FLOPs), not nothing because the loop's body is another computation?"""
    def body(a, w):
        acc = jax.lax.pcast(jnp.zeros((a.shape[0], w.shape[1]), a.dtype), ("X", "Y"), to="varying")
        whole = jax.lax.fori_loop(0, a.shape[1], lambda k, acc: acc + jax.lax.dynamic_slice_in_dim(a, k, 1, 1)
                                  @ jax.lax.dynamic_slice_in_dim(w, k, 1, 0), acc)
        return jnp.concatenate([jax.lax.psum(whole[:, :8], "Y"), jax.lax.psum(whole[:, 8:], "Y")], axis=1)

    f = jax.shard_map(body, mesh=mesh_2x4, in_specs=(P("X", "Y"), P("Y", None)), out_specs=P("X", None))
    a = compile_on(mesh_2x4, f, (np.ones((16, 16), np.float32), P("X", "Y")), (np.ones((16, 16), np.float32), P("Y", None)))
    needs = [n for c in a.of_kind("all-reduce") for n in c.matmul_needs]
    assert needs and all(n == 2 * 8 * 4 * 16 for n in needs)


def test_an_all_to_all_of_copies_of_one_value_is_a_gather(mesh_2x4):
    """An all_to_all of a broadcast copy gives each device every device's value: is it marked as
    copies (and refused where all-gathers are, saying why), while an all_to_all of distinct
    blocks is not?"""
    from assignments.contract import Case
    from assignments.rules import Forbid

    def gathered(x):
        z = jnp.broadcast_to(x[None], (4,) + x.shape)
        return jax.lax.all_to_all(z, "Y", 0, 0, tiled=True).reshape(-1, x.shape[1])

    def scattered(x):
        return jax.lax.all_to_all(x.reshape(4, -1, x.shape[1]), "Y", 0, 0, tiled=True).reshape(-1, x.shape[1])

    x = np.arange(16 * 16, dtype=np.float32).reshape(16, 16)
    copies = compile_on(mesh_2x4, jax.shard_map(gathered, mesh=mesh_2x4, in_specs=P("X", "Y"), out_specs=P("X", "Y")),
                        (x, P("X", "Y")))
    blocks = compile_on(mesh_2x4, jax.shard_map(scattered, mesh=mesh_2x4, in_specs=P("X", "Y"), out_specs=P("X", "Y")),
                        (x, P("X", "Y")))
    assert [c.copies for c in copies.of_kind("all-to-all")] == [True]
    assert [c.copies for c in blocks.of_kind("all-to-all")] == [False]
    rule, case = Forbid("all-gather"), Case((2, 4), {})
    [message] = rule.violations(copies, case)
    assert message.startswith("communication observed: all-to-all over Y of ") and \
        "(an all-to-all whose blocks are all copies of one value sends every device that value, as an all-gather " \
        "does, and counts as one); allowed: no all-gather" in message
    assert rule.violations(blocks, case) == []


ROUTING_AND_ACTIVATIONS = """
HloModule m

%fused_ranks (r: s32[64,8]) -> s32[64,8] {
  %r = s32[64,8]{1,0} parameter(0)
  ROOT %twice = s32[64,8]{1,0} add(%r, %r)
}

%body (p: (s32[], f32[64,8], s32[64,8])) -> (s32[], f32[64,8], s32[64,8]) {
  %p = (s32[], f32[64,8]{1,0}, s32[64,8]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %acc = f32[64,8]{1,0} get-tuple-element(%p), index=1
  %ranks = s32[64,8]{1,0} get-tuple-element(%p), index=2
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  %ones = s32[64,8]{1,0} broadcast(%one), dimensions={}
  %ranked = s32[64,8]{1,0} add(%ranks, %ones)
  %as_float = f32[64,8]{1,0} convert(%ranked)
  %added = f32[64,8]{1,0} add(%acc, %as_float)
  ROOT %t = (s32[], f32[64,8]{1,0}, s32[64,8]{1,0}) tuple(%next, %added, %ranked)
}

%cond (p: (s32[], f32[64,8], s32[64,8])) -> pred[] {
  %p = (s32[], f32[64,8]{1,0}, s32[64,8]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %n = s32[] constant(3)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

%stops_on_a (p: (s32[], f32[64,8], s32[64,8])) -> pred[] {
  %p = (s32[], f32[64,8]{1,0}, s32[64,8]{1,0}) parameter(0)
  %acc = f32[64,8]{1,0} get-tuple-element(%p), index=1
  %i = s32[] get-tuple-element(%p), index=0
  %zero = f32[] constant(0)
  %sum = f32[] reduce(%acc, %zero), dimensions={0,1}, to_apply=%add
  %bound = s32[] convert(%sum)
  ROOT %lt = pred[] compare(%i, %bound), direction=LT
}

%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %s = f32[] add(%x, %y)
}

%keep (q: s32[64,8]) -> s32[64,8] {
  ROOT %q = s32[64,8]{1,0} parameter(0)
}

%flip (q: s32[64,8]) -> s32[64,8] {
  %q = s32[64,8]{1,0} parameter(0)
  ROOT %minus = s32[64,8]{1,0} negate(%q)
}

ENTRY %main (a: f32[64,8], b: s32[64]) -> (f32[64,8], s32[64,8]) {
  %a = f32[64,8]{1,0} parameter(0)
  %b = s32[64]{0} parameter(1)
  %experts = s32[64,8]{1,0} iota(), iota_dimension=1
  %chosen = s32[64,8]{1,0} broadcast(%b), dimensions={0}
  %hit = pred[64,8]{1,0} compare(%chosen, %experts), direction=EQ
  %onehot = s32[64,8]{1,0} convert(%hit)
  %ranks = s32[64,8]{1,0} fusion(%onehot), kind=kLoop, calls=%fused_ranks
  %mask = f32[64,8]{1,0} convert(%hit)
  %tokens = f32[64,8]{1,0} multiply(%a, %mask)
  %bits = s32[64,8]{1,0} bitcast-convert(%a)
  %zero = s32[] constant(0)
  %start = (s32[], f32[64,8]{1,0}, s32[64,8]{1,0}) tuple(%zero, %tokens, %ranks)
  %loop = (s32[], f32[64,8]{1,0}, s32[64,8]{1,0}) while(%start), condition=%cond, body=%body
  %carried = s32[64,8]{1,0} get-tuple-element(%loop), index=2
  %loop_on_a = (s32[], f32[64,8]{1,0}, s32[64,8]{1,0}) while(%start), condition=%stops_on_a, body=%body
  %carried_on_a = s32[64,8]{1,0} get-tuple-element(%loop_on_a), index=2
  %first = s32[] slice(%b), slice={[0:1]}
  %first_one = s32[] reshape(%first)
  %by_b = pred[] compare(%first_one, %zero), direction=GT
  %chosen_by_b = s32[64,8]{1,0} conditional(%by_b, %ranks, %carried), true_computation=%keep, false_computation=%flip
  %corner = s32[1,1]{1,0} slice(%bits), slice={[0:1], [0:1]}
  %corner_one = s32[] reshape(%corner)
  %by_a = pred[] compare(%corner_one, %zero), direction=GT
  %chosen_by_a = s32[64,8]{1,0} conditional(%by_a, %ranks, %carried), true_computation=%keep, false_computation=%flip
  %sum = s32[64,8]{1,0} add(%chosen_by_a, %carried_on_a)
  %out = s32[64,8]{1,0} add(%sum, %chosen_by_b)
  %result = f32[64,8]{1,0} get-tuple-element(%loop), index=1
  ROOT %r = (f32[64,8]{1,0}, s32[64,8]{1,0}) tuple(%result, %out)
}
"""


def test_values_computed_from_the_routing_alone_are_bookkeeping():
    """Does each value know the arguments it is computed from, through fusions, the elements of
    a loop's carried tuple (each its own) and a conditional's branches, so that a one-hot of the
    integer argument, its running ranks and a float mask made of it are bookkeeping, while
    anything computed from the float argument (in any type: its bits as integers) is an
    activation? And does a loop that stops, or a branch chosen, on a value computed from the
    float argument make what it returns computed from it too?"""
    from assignments.hlo import values_from_text

    values = values_from_text(ROUTING_AND_ACTIVATIONS, top=100)
    by_name = {}
    for v in values:
        by_name.setdefault(v.name, []).append(v)
    bookkeeping = {"onehot", "ranks", "mask", "hit", "chosen", "experts", "chosen_by_b"}
    activations = {"tokens", "bits", "chosen_by_a", "sum", "out"}
    for name in bookkeeping:
        assert all(v.bookkeeping for v in by_name[name]), by_name[name]
    for name in activations:
        assert not any(v.bookkeeping for v in by_name[name]), by_name[name]
    assert {v.sources for v in by_name["ranks"]} == {(1,)} and by_name["experts"][0].sources == ()
    # The loop's tuple, element by element: the counter and the ranks from b alone, the sum from both.
    assert sorted((v.shape.dims, v.shape.dtype, v.sources, v.bookkeeping) for v in by_name["loop"]) == [
        ((), "s32", (), True), ((64, 8), "f32", (0, 1), False), ((64, 8), "s32", (1,), True)]
    assert [v.sources for v in by_name["loop_on_a"]] == [(0, 1), (0, 1), (0, 1)]
    # Ranked for the memory rules: every activation before any bookkeeping.
    assert [v.bookkeeping for v in values] == sorted(v.bookkeeping for v in values)


def test_the_memory_rules_count_activations_only_and_name_their_arguments():
    """Does `values_at_least` leave bookkeeping out, and does a value describe itself by its
    shape and the arguments it is computed from, by name, never by XLA's name for it?
    `arguments` maps the parameters of a program that left its first argument out."""
    from assignments.hlo import values_from_text

    analysis = analyze_text(ROUTING_AND_ACTIVATIONS, MESH_SHAPE, AXES)
    big = analysis.values_at_least(64 * 8)
    assert big and not any(v.bookkeeping for v in big)
    assert {v.name for v in big} >= {"tokens", "bits", "out"} and "onehot" not in {v.name for v in big}
    tokens = next(v for v in values_from_text(ROUTING_AND_ACTIVATIONS, top=100, arguments=(1, 2)) if v.name == "tokens")
    assert tokens.sources == (1, 2)
    assert tokens.describe(("W", "A", "B")) == "f32[64,8] (512 elements, from A and B)"
    assert tokens.describe() == "f32[64,8] (512 elements, from argument 2 and argument 3)"
    loop = next(v for v in analysis.largest_values if v.name == "loop" and v.shape.dtype == "f32")
    assert loop.describe(("A", "B")) == "f32[64,8] (512 elements, from A and B, carried through a loop)"


def test_gshard_ranks_are_bookkeeping_in_a_compiled_program(mesh_2x4):
    """A one-hot of integer routing and its running sum (GShard's ranks), compiled by XLA: no
    value computed from them alone counts against a memory bound, the float values computed
    from the tokens do, and an argument the program never reads (left out by JAX) does not
    shift the names of the others."""
    def f(unused, a, b):
        onehot = jax.nn.one_hot(b, 32, dtype=jnp.int32)                   # [256, 32] from b alone
        ranks = jnp.cumsum(onehot, axis=0) * onehot                       # each pair's rank
        dense = a[:, :, None] * jnp.ones((1, 1, 16), a.dtype)            # [256, 8, 16] from a
        return jnp.sum(dense, axis=2) + ranks.sum(1, keepdims=True), ranks

    args = (np.ones(3, np.float32), np.ones((256, 8), np.float32), np.arange(256, dtype=np.int32) % 32)
    a = analyze(jax.jit(f).lower(*args).compile(), mesh_2x4)
    flagged = a.values_at_least(256 * 8)
    assert flagged and all(1 in v.sources and not v.bookkeeping for v in flagged), a.largest_values
    routing = [v for v in a.largest_values if v.bookkeeping]
    assert routing and all(v.sources == (2,) for v in routing if v.sources), routing
    assert all(v.sources in ((1,), (1, 2)) for v in a.largest_values if not v.bookkeeping), a.largest_values
