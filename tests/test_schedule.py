"""The schedule, drawn: every arrow, group and step of the picture checked against the
analysis it draws, the step model against hand-made programs, the timeline against the cost
model, and (marked `browser`) the picture in a real JupyterLab, light and dark."""
from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from grading import load_module
from routes import stop
from jax.sharding import NamedSharding, PartitionSpec as P

import assignments
from assignments.costs import cube_slice, estimate, pipelined_seconds
from assignments.hlo import ProgramAnalysis, analyze, analyze_text
from assignments.schedule import WIDTH, draw_schedule
from assignments.steps import group_steps, timeline

SVG = "{http://www.w3.org/2000/svg}"


def load(repo_root, name):
    return load_module(os.path.join(repo_root, "solutions", f"{name}.py"))


@pytest.fixture(scope="module")
def sol2(repo_root):
    return load(repo_root, "problem2")


@pytest.fixture(scope="module")
def sol3(repo_root):
    return load(repo_root, "problem3")


@pytest.fixture(scope="module")
def sol4(repo_root):
    return load(repo_root, "problem4")


def abstract(mesh, shape, spec, dtype=jnp.float32):
    return jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, P(*spec)))


def compiled(fn, on, *args, **kwargs) -> ProgramAnalysis:
    """The analysis of `jax.jit(fn)(*args, **kwargs)` on the mesh `on`."""
    return analyze(jax.jit(lambda *a: fn(*a, **kwargs)).lower(*args).compile(), on)


def tiles(svg: str) -> list[dict]:
    """What each tile of the picture shows: its step number (or the iterations a box stands
    for), and per collective its kind, arrows (source, target) and groups."""
    root = ET.fromstring(svg)
    out = []
    for tile in root.iter(f"{SVG}g"):
        if tile.get("class") != "tile":
            continue
        drawn = {}
        for c in tile.iter(f"{SVG}g"):
            if c.get("class") == "collective":
                drawn[int(c.get("data-collective"))] = {
                    "kind": c.get("data-kind"),
                    "arrows": [tuple(map(int, a.get("data-pair").split("-"))) for a in c.iter(f"{SVG}g")
                               if a.get("class") == "arrow"],
                    "groups": [tuple(map(int, g.get("data-group").split(","))) for g in c.iter(f"{SVG}g")
                               if g.get("class") == "group"]}
        out.append({"program": tile.get("data-program"), "step": int(tile.get("data-step")),
                    "more": tile.get("data-more"), "collectives": drawn})
    return out


def ring(rows: int, n: int, step: int) -> set[tuple[int, int]]:
    """Every row of a rows x n mesh sending `step` places along its row, wrapping around."""
    return {(r * n + j, r * n + (j + step) % n) for r in range(rows) for j in range(n)}


def steps_drawn(svg: str, program: str) -> tuple[list[dict], list[dict]]:
    shown = [t for t in tiles(svg) if t["program"] == program]
    return [t for t in shown if t["more"] == ""], [t for t in shown if t["more"] != ""]


# ---------------------------------------------------------------------------------------
# The picture's content, from compiled rings and all-to-alls


def test_one_way_ring_draws_its_pairs_once_per_iteration(sol3, mesh_2x4):
    """Does each step of a one-way ring draw exactly the permute's pairs, one step per loop
    iteration, numbered in order?"""
    a = compiled(sol3.allgather_matmul, mesh_2x4, abstract(mesh_2x4, (8, 16), ("X", "Y")),
                 abstract(mesh_2x4, (16, 32), (None, "Y")), mesh=mesh_2x4)
    (permute,) = a.collectives
    assert set(permute.pairs) == ring(2, 4, -1)
    assert [s.runs for s in a.stages if s.loop] == [permute.count] == [3]
    schedule = draw_schedule(a)
    steps, boxes = steps_drawn(schedule.svg(), "program")
    assert [t["step"] for t in steps] == [1, 2, 3] and boxes == []
    for t in steps:
        assert set(t["collectives"]) == {0}
        drawn = t["collectives"][0]["arrows"]
        assert sorted(drawn) == sorted(permute.pairs), t
    text = str(schedule)
    assert re.search(r"step 1 \(loop 1/3\): collective-permute over Y \(-1\), 64 B from each device: "
                     r"d0->d3 d1->d0 d2->d1 d3->d2 d4->d7", text), text


def test_long_loop_draws_a_few_steps_then_one_box(sol3):
    """Does a ring of 8 draw its first 3 steps, then one box for the other 4 (7 in all)?"""
    mesh = assignments.make_mesh((1, 8))
    a = compiled(sol3.allgather_matmul, mesh, abstract(mesh, (4, 32), ("X", "Y")),
                 abstract(mesh, (32, 16), (None, "Y")), mesh=mesh)
    (permute,) = a.collectives
    steps, boxes = steps_drawn(draw_schedule(a).svg(), "program")
    assert [t["step"] for t in steps] == [1, 2, 3]
    assert [(b["step"], b["more"]) for b in boxes] == [(4, "4")]
    assert len(steps) + int(boxes[0]["more"]) == permute.count == 7
    assert all(sorted(t["collectives"][0]["arrows"]) == sorted(ring(1, 8, -1)) for t in steps)


def test_bidirectional_ring_on_an_odd_mesh_draws_both_directions_in_each_step(sol4):
    """On a ring of 3, are the two directions of each step one step (they need nothing from
    each other), each drawn with its own pairs, one step per iteration?"""
    mesh = assignments.make_mesh((1, 3))
    a = compiled(sol4.reducescatter_matmul_bidirectional, mesh, abstract(mesh, (4, 6), ("X", "Y")),
                 abstract(mesh, (6, 12), ("Y", None)), mesh=mesh)
    permutes = {c.directions: i for i, c in enumerate(a.collectives)}
    assert set(permutes) == {(-1,), (1,)}
    assert set(a.collectives[permutes[(1,)]].pairs) == ring(1, 3, 1)
    assert set(a.collectives[permutes[(-1,)]].pairs) == ring(1, 3, -1)
    steps, boxes = steps_drawn(draw_schedule(a).svg(), "program")
    assert [t["step"] for t in steps] == [1, 2] == list(range(1, a.collectives[0].count + 1)) and not boxes
    for t in steps:
        assert set(t["collectives"]) == set(permutes.values())
        for i, drawn in t["collectives"].items():
            assert sorted(drawn["arrows"]) == sorted(a.collectives[i].pairs)


def test_the_backward_pass_of_a_ring_is_a_ring_the_other_way(repo_root, mesh_2x4):
    """training's lesson (written answer 1): jax.vjp of problem 3's ring compiles to the forward
    ring (A's blocks to y-1, kept for dW), a ring of as many steps the other way (dA's partial sums
    to y+1, each step beside its matmul), and W's cotangent psummed over X; the schedule says so."""
    sol = load(repo_root, "training")

    def grads(A, W, dOut):
        _, pullback = jax.vjp(lambda a, w: sol.problem3_allgather_matmul(a, w, mesh=mesh_2x4), A, W)
        return pullback(dOut)

    a = compiled(grads, mesh_2x4, abstract(mesh_2x4, (8, 16), ("X", "Y")), abstract(mesh_2x4, (16, 32), (None, "Y")),
                 abstract(mesh_2x4, (8, 32), ("X", "Y")))
    permutes = {c.directions: c for c in a.collectives if c.kind == "collective-permute"}
    assert set(permutes) == {(-1,), (1,)} and all(c.axes == ("Y",) and c.count == 3 for c in permutes.values())
    assert set(permutes[(1,)].pairs) == ring(2, 4, 1)
    assert {c.axes for c in a.collectives if c.kind not in ("collective-permute",)} == {("X",)}
    text = str(draw_schedule(a))
    assert re.search(r"step \d+ \(loop 1/3\): collective-permute over Y \(\+1\), 64 B from each device: .*"
                     r"matmul [\d.]+ ns, at the same time", text), text


def test_all_to_all_in_a_loop_draws_its_groups(mesh_2x4):
    """Does an all-to-all in a loop of 5 draw its replica groups (columns of the 4x2 mesh),
    three steps, then a box for the other 2?"""
    mesh = assignments.make_mesh((4, 2))

    def exchange(x):
        def local(b):
            return jax.lax.fori_loop(0, 5, lambda i, b: jax.lax.all_to_all(b, "X", 0, 0, tiled=True) * 2.0, b)
        return jax.shard_map(local, mesh=mesh, in_specs=P("X"), out_specs=P("X"))(x)

    a = compiled(exchange, mesh, abstract(mesh, (64, 8), ("X", None)))
    (a2a,) = a.collectives
    assert a2a.kind == "all-to-all" and a2a.count == 5
    assert sorted(a2a.groups) == [(0, 2, 4, 6), (1, 3, 5, 7)]
    steps, boxes = steps_drawn(draw_schedule(a).svg(), "program")
    assert [t["step"] for t in steps] == [1, 2, 3] and [b["more"] for b in boxes] == ["2"]
    for t in steps:
        assert t["collectives"][0]["kind"] == "all-to-all"
        assert sorted(t["collectives"][0]["groups"]) == sorted(a2a.groups)
        assert t["collectives"][0]["arrows"] == []


def test_loop_of_unknown_length_is_drawn_once_and_said_so(sol2, mesh_2x4):
    """Does problem2's all-to-all, in a while loop whose length the routing decides, draw one
    iteration and a box for "as many as the run decides", and say its total is a bound?"""
    args = (abstract(mesh_2x4, (4, 8, 24), ("X", None, "Y")), abstract(mesh_2x4, (32, 8), ("X", "Y")),
            abstract(mesh_2x4, (32,), ("X",), jnp.int32))
    a = compiled(sol2.moe_all_to_all, mesh_2x4, *args, mesh=mesh_2x4)
    loop = [s for s in a.stages if s.loop and any(a.collectives[e.collective].kind == "all-to-all"
                                                   for e in s.events if e.collective >= 0)]
    assert [s.runs for s in loop] == [None]
    schedule = draw_schedule(a)
    steps, boxes = steps_drawn(schedule.svg(), "program")
    assert [b["more"] for b in boxes] == ["?"]
    in_loop = [t for t in steps if any(d["kind"] == "all-to-all" for d in t["collectives"].values())]
    assert in_loop and all(g for t in in_loop for d in t["collectives"].values() for g in d["groups"])
    assert "at least" in str(schedule) and "the run decides" in str(schedule)
    # Drawn compact (one tile per step of the loop), the heading names no last step it cannot know.
    compact = str(draw_schedule(a, compact=True))
    assert re.search(r"steps \d+, \d+\.\. \(loop x\?\)", compact), compact
    assert not re.search(r"\.\. \d+ \(loop x\?\)", compact), compact


# ---------------------------------------------------------------------------------------
# The step model on hand-made programs, and the timeline against the cost model

STRAIGHT = """
HloModule m

ENTRY %main (x: f32[64,64], w: f32[64,64]) -> (f32[64,64], f32[64,64]) {
  %x = f32[64,64]{1,0} parameter(0)
  %w = f32[64,64]{1,0} parameter(1)
  %ag = f32[64,64]{1,0} all-gather(%x), channel_id=1, replica_groups=[2,4]<=[8], dimensions={0}
  %late = f32[64,64]{1,0} dot(%ag, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %early = f32[64,64]{1,0} dot(%x, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %cp = f32[64,64]{1,0} collective-permute(%early), channel_id=2, source_target_pairs={{0,1},{1,2},{2,3},{3,0},{4,5},{5,6},{6,7},{7,4}}
  %beside = f32[64,64]{1,0} dot(%w, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %t = (f32[64,64]{1,0}, f32[64,64]{1,0}) tuple(%late, %cp)
}
"""


def test_step_model_reads_what_each_event_waits_for():
    """Does the step model see that the first dot waits for the all-gather, the permute waits
    for the second dot, and the third waits for nothing?"""
    a = analyze_text(STRAIGHT, (2, 4), ("X", "Y"))
    (stage,) = a.stages
    kinds = [(a.collectives[e.collective].kind if e.collective >= 0 else "dot", e.after) for e in stage.events]
    assert kinds == [("all-gather", ()), ("dot", (0,)), ("dot", ()), ("collective-permute", (2,)), ("dot", ())]
    assert all(e.flops == 2 * 64 ** 3 for e in stage.events if e.collective < 0)
    # The permute needs a dot computed after the all-gather's step began: two steps.
    assert group_steps(stage, [set(e.after) for e in stage.events]) == [[0], [3]]


def test_rank1_updates_count_as_matmuls_where_no_step_can_have_fused_them(mesh_2x4):
    """A product made by rank-1 updates (a multiply of two broadcasts, one column times one row
    per run): counted as the whole product's matmul work in a loop of static length, as matmul
    work in a loop whose length the compiler cannot know (a stage run an unknown number of
    times), and not in straight-line code beside a collective, where XLA:CPU may have fused an
    honest step's rank-1 product (a dot of contracted size 1) into the next step's chain."""
    def rank1_loop(x, w, bound=None):
        def body(k, acc):
            return acc + jax.lax.dynamic_slice_in_dim(x, k, 1, axis=1) * jax.lax.dynamic_slice_in_dim(w, k, 1, axis=0)
        acc = jnp.zeros((x.shape[0], w.shape[1]), x.dtype)
        if bound is None:
            return jax.lax.fori_loop(0, x.shape[1], body, acc)
        return jax.lax.while_loop(lambda s: s[0] < bound, lambda s: (s[0] + 1, body(s[0], s[1])), (0, acc))[1]

    def static(x, w):
        return rank1_loop(x, w)

    def unknown(x, w):
        return rank1_loop(x, w, bound=jnp.where(jnp.isnan(x[0, 0]), 0, x.shape[1]))

    def beside_a_permute(x, w):
        sent = jax.lax.ppermute(x, "Y", [(j, (j + 1) % 4) for j in range(4)])
        return sum(x[:, k:k + 1] * w[k:k + 1, :] for k in range(x.shape[1])) + sent[:, :1]

    stages = {}
    for name, body in (("static", static), ("unknown", unknown), ("beside", beside_a_permute)):
        f = jax.shard_map(body, mesh=mesh_2x4, in_specs=(P("X", "Y"), P(None, None)), out_specs=P("X", "Y"),
                          check_vma=False)
        compiled = jax.jit(f).lower(jnp.ones((8, 32), jnp.float32), jnp.ones((8, 16), jnp.float32)).compile()
        stages[name] = analyze(compiled, mesh_2x4).stages
    whole = 2 * 4 * 8 * 16  # one device's [4, 8] @ [8, 16]
    assert [(s.runs, sum(e.flops for e in s.events if e.collective < 0)) for s in stages["static"]] == [(1, whole)]
    assert any(s.runs is None and any(e.collective < 0 and e.flops > 0 for e in s.events) for s in stages["unknown"])
    assert all(e.flops == 0 for s in stages["beside"] for e in s.events), stages["beside"]


def test_timeline_overlaps_only_what_the_program_allows():
    """On the timeline, does the dot that waits for the all-gather start after it, and the
    dot that needs nothing run while the links are busy?"""
    a = analyze_text(STRAIGHT, (2, 4), ("X", "Y"))
    (stage,) = timeline(a, "TPU v5e").stages
    network = [b for b in stage.bars if b.lane == "network"]
    compute = sorted((b for b in stage.bars if b.lane == "compute"), key=lambda b: b.start_s)
    gather_end = network[0].start_s + network[0].seconds
    assert network[0].start_s == 0 and compute[0].start_s == 0          # the early dot needs nothing
    assert any(abs(b.start_s - gather_end) < 1e-15 or b.start_s >= gather_end for b in compute[1:])
    assert network[1].start_s >= compute[0].start_s + compute[0].seconds  # the permute waits for its dot


def test_timeline_of_the_books_example_matches_the_cost_model(sol3, mesh_2x4):
    """At the book's sizes on a TPU v5e, is the ring's timeline the pipelined time of the cost
    model, and plain jax.jit's the serialized one (all-gather, then the matmul)?"""
    args = (abstract(mesh_2x4, (1024, 2048), ("X", "Y")), abstract(mesh_2x4, (2048, 8192), (None, "Y")))
    ring_a = compiled(sol3.allgather_matmul, mesh_2x4, *args, mesh=mesh_2x4)
    plain_a = compiled(lambda a, w: a @ w, mesh_2x4, *args)
    ring_e, plain_e = estimate(ring_a, "TPU v5e"), estimate(plain_a, "TPU v5e")
    assert timeline(ring_a, "TPU v5e").total_s == pytest.approx(
        pipelined_seconds(ring_e.compute_s, ring_e.comm_s, steps=4), rel=1e-6)
    assert timeline(plain_a, "TPU v5e").total_s == pytest.approx(plain_e.serialized_s, rel=1e-6)


# ---------------------------------------------------------------------------------------
# Old analyses, the picture's colours and size, and where students see it


def test_json_round_trip_and_older_json_without_steps(sol3, mesh_2x4):
    """Does the analysis keep its pairs, groups and stages through JSON, and does JSON written
    before they existed still read and draw the same arrows and groups?"""
    a = compiled(sol3.allgather_matmul, mesh_2x4, abstract(mesh_2x4, (8, 16), ("X", "Y")),
                 abstract(mesh_2x4, (16, 32), (None, "Y")), mesh=mesh_2x4)
    assert ProgramAnalysis.from_json(json.loads(json.dumps(a.to_json()))) == a
    old = json.loads(json.dumps(a.to_json()))
    del old["stages"]
    for c in old["collectives"]:
        del c["pairs"], c["groups"]
    before = ProgramAnalysis.from_json(old)
    assert before.stages == () and before.collectives[0].pairs == ()
    steps, boxes = steps_drawn(draw_schedule(before).svg(), "program")
    assert sorted(steps[0]["collectives"][0]["arrows"]) == sorted(a.collectives[0].pairs)

    plain = compiled(lambda x: x.sum(axis=0), mesh_2x4, abstract(mesh_2x4, (8, 16), ("X", "Y")))
    old = plain.to_json()
    for c in old["collectives"]:
        del c["groups"]
    (step,), _ = steps_drawn(draw_schedule(ProgramAnalysis.from_json(old)).svg(), "program")
    assert sorted(step["collectives"][0]["groups"]) == sorted(plain.collectives[0].groups)


def _luminance(hex_colour: str) -> float:
    channels = [int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def _contrast(a: str, b: str) -> float:
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_picture_reads_in_any_theme_at_body_size(sol3, sol4, mesh_2x4):
    """Is every text at the notebook's body size (13 px) in the page's own colour (secondary
    text at most a little fainter), every line a JupyterLab theme colour whose fallback has
    3:1 against a white and a dark page alike, and is the picture no wider than a notebook at
    1024 px with the file browser open (572 px), with the student's and plain jax.jit's tiles
    side by side?"""
    args = (abstract(mesh_2x4, (8, 16), ("X", "Y")), abstract(mesh_2x4, (16, 32), (None, "Y")))
    schedule = draw_schedule({"allgather_matmul": compiled(sol3.allgather_matmul, mesh_2x4, *args, mesh=mesh_2x4),
                              "plain jax.jit": compiled(lambda a, w: a @ w, mesh_2x4, *args)}, compact=True)
    svg = schedule.svg()
    root = ET.fromstring(svg)
    assert float(root.get("width")) <= WIDTH <= 572 and "max-width:100%" in root.get("style")
    texts = list(root.iter(f"{SVG}text"))
    assert len(texts) > 30
    for text in texts:
        style = dict(part.split(":", 1) for part in text.get("style").split(";"))
        assert float(style["font-size"].removesuffix("px")) >= 13, (text.text, style)
        assert style["fill"] == "currentColor" and float(style.get("fill-opacity", 1)) >= 0.75, (text.text, style)
    colours = set(re.findall(r"(?:fill|stroke):([^;\"]+)", svg)) - {"none", "currentColor"}
    assert colours, colours
    for colour in colours:
        fallback = re.fullmatch(r"var\(--jp-[\w-]+, (#[0-9a-f]{6})\)", colour)
        assert fallback, colour
        assert min(_contrast(fallback[1], "#ffffff"), _contrast(fallback[1], "#111111")) >= 3.0, colour
    names = [(e.text, float(e.get("x"))) for e in root.iter(f"{SVG}text") if e.get("class") == "program"]
    assert [n for n, _ in names] == ["allgather_matmul", "plain jax.jit"] and names[1][1] > names[0][1]


RING = """
HloModule ring

ENTRY %main (x: f32[8,8]) -> (f32[8,8], f32[8,8]) {
  %x = f32[8,8]{1,0} parameter(0)
  %next = f32[8,8]{1,0} collective-permute(%x), channel_id=1, source_target_pairs={{0,1},{1,2},{2,3},{3,0},{4,5},{5,6},{6,7},{7,4}}
  %previous = f32[8,8]{1,0} collective-permute(%x), channel_id=2, source_target_pairs={{1,0},{2,1},{3,2},{0,3},{5,4},{6,5},{7,6},{4,7}}
  ROOT %t = (f32[8,8]{1,0}, f32[8,8]{1,0}) tuple(%next, %previous)
}
"""
"""Both ways round the rings of 4 of a 2x4 mesh at once, each with its wrap-around pair."""


def legend(svg: str) -> dict[str, dict[str, ET.Element]]:
    """The picture's legends: {"direction": {"-1": entry, ...}, "kind": {...}, "lane": {...}}."""
    out: dict[str, dict[str, ET.Element]] = {}
    for g in ET.fromstring(svg).iter(f"{SVG}g"):
        if g.get("data-legend"):
            name = g.get("data-legend")
            out.setdefault(name, {})[g.get(f"data-{name}")] = g
    return out


def words(element: ET.Element) -> str:
    return " ".join(t.text for t in element.iter(f"{SVG}text"))


def stroke(element: ET.Element) -> str:
    """The stroke colour of an element's first line (an arrow, a swatch, an outline)."""
    return next(re.search(r"stroke:([^;]+)", e.get("style"))[1] for e in element.iter()
                if e.tag in (f"{SVG}path", f"{SVG}rect", f"{SVG}polygon") and "stroke:" in (e.get("style") or ""))


RING_OF_4 = cube_slice("TPU v5p", (2, 4), ("X", "Y"), ring="Y")
"""The 2x4 mesh inside a full 4x4x4 v5p cube, Y on one of its 4-chip axes: a real ring."""


def test_legend_is_by_ring_direction_with_the_wrap_around_in_its_own():
    """Both ways round a ring of 4 (a wrapped axis): does the legend have exactly the two
    directions drawn, each in its arrows' colour (the wrap-around arcs d0 -> d3 and d3 -> d0
    included), naming the wraparound link as part of its direction? One way: only that
    direction's entry?"""
    svg = draw_schedule(analyze_text(RING, (2, 4), ("X", "Y")), RING_OF_4).svg()
    arrows = [g for g in ET.fromstring(svg).iter(f"{SVG}g") if g.get("class") == "arrow"]
    drawn = {g.get("data-pair"): (g.get("data-direction"), stroke(g)) for g in arrows}
    entries = legend(svg)["direction"]
    assert set(entries) == {d for d, _ in drawn.values()} == {"+1", "-1"}
    colours = {d: stroke(entry) for d, entry in entries.items()}
    assert colours["+1"] != colours["-1"]
    assert all(colour == colours[d] for d, colour in drawn.values()), drawn
    assert drawn["0-3"] == ("-1", colours["-1"]) and drawn["3-0"] == ("+1", colours["+1"])
    assert "d0\u2192d3 over the wraparound link" in words(entries["-1"]) and "previous" in words(entries["-1"])
    assert "d3\u2192d0 over the wraparound link" in words(entries["+1"]) and "next" in words(entries["+1"])
    # each collective's line under its tile carries its direction's swatch
    tile = next(g for g in ET.fromstring(svg).iter(f"{SVG}g") if g.get("class") == "tile")
    assert re.search(r"permute over Y \(\+1\).*permute over Y \(-1\)", words(tile)), words(tile)

    one_way = RING.replace("tuple(%next, %previous)", "tuple(%previous, %previous)")
    one_way = "\n".join(line for line in one_way.splitlines() if "%next =" not in line)
    drawn = legend(draw_schedule(analyze_text(one_way, (2, 4), ("X", "Y")), RING_OF_4).svg())
    assert set(drawn["direction"]) == {"-1"} and "kind" not in drawn and "label" not in drawn


def test_legends_show_only_what_is_drawn(mesh_2x4):
    """An all-reduce with no matmul: no ring direction, one outline kind, the links' lane
    alone. An all-gather, a permute and matmuls: the permute's one direction, the all-gather's
    outline, both lanes (on the v5e, where Y is a line, the permute's wrapped pair travels the
    other way: both directions). Every legend entry names something drawn, and everything drawn
    has one."""
    plain = draw_schedule(compiled(lambda x: x.sum(axis=0), mesh_2x4, abstract(mesh_2x4, (8, 16), ("X", "Y")))).svg()
    mixed = draw_schedule(analyze_text(STRAIGHT, (2, 4), ("X", "Y"))).svg()
    for svg, directions, kinds, lanes in ((plain, set(), {"all-reduce"}, {"network"}),
                                          (mixed, {"+1", "-1"}, {"all-gather"}, {"network", "compute"})):
        root = ET.fromstring(svg)
        shown = legend(svg)
        drawn = {g.get("data-kind") for g in root.iter(f"{SVG}g") if g.get("class") == "collective"}
        assert set(shown.get("direction", {})) == directions
        assert set(shown.get("direction", {})) == {g.get("data-direction") for g in root.iter(f"{SVG}g")
                                                   if g.get("class") == "arrow"}
        assert set(shown.get("kind", {})) == kinds == drawn - {"collective-permute"}
        assert set(shown["lane"]) == lanes == {r.get("data-lane") for r in root.iter(f"{SVG}rect")
                                               if r.get("class") == "bar"}
    assert "permute" not in " ".join(words(e) for e in legend(plain)["kind"].values())
    assert "act together" in words(legend(plain)["kind"]["all-reduce"])


def _routes(svg: str) -> dict[str, dict]:
    """Per pair of the first tile: its drawn way (data-direction), whether it is routed along a
    line, its segments (the links it crosses, in order), its arcs and its colour."""
    tile = next(g for g in ET.fromstring(svg).iter(f"{SVG}g") if g.get("class") == "tile")
    out = {}
    for g in tile.iter(f"{SVG}g"):
        if g.get("class") == "arrow":
            paths = list(g.iter(f"{SVG}path"))
            out[g.get("data-pair")] = {
                "direction": g.get("data-direction"), "line": g.get("data-route") == "line",
                "segments": [p.get("data-link") for p in paths if p.get("data-link")],
                "arcs": sum(" Q" in p.get("d") for p in paths), "colour": stroke(g),
                "wraparound": g.get("data-wraparound") == "1"}
    return out


def _link_bytes(svg: str) -> dict[tuple[str, str], int]:
    """{(link "a-b", way of travel "+1"/"-1"): bytes} as labelled in the first tile."""
    tile = next(g for g in ET.fromstring(svg).iter(f"{SVG}g") if g.get("class") == "tile")
    return {(g.get("data-link"), g.get("data-travel")): int(g.get("data-link-bytes")) for g in tile.iter(f"{SVG}g")
            if g.get("data-link-bytes")}


def test_on_a_line_the_wrapped_pair_crosses_every_link_the_other_way():
    """One way round the rings of 4 on the v5e, where Y is a line (no wraparound link): is the
    wrapped pair d0 -> d3 drawn link by link through d1 and d2 (n - 1 = 3 segments, no arc), in
    the colour of its way of travel (+1, the other way from its ring's arrows), and does every
    link of each row carry labelled bytes in both directions, one f32[8,8] (256 B) each way?
    On the wrapped axis of a cube the same pair is one arc over the wraparound link, named so,
    and no link is labelled."""
    one_way = RING.replace("tuple(%next, %previous)", "tuple(%previous, %previous)")
    one_way = "\n".join(line for line in one_way.splitlines() if "%next =" not in line)
    a = analyze_text(one_way, (2, 4), ("X", "Y"))
    line = draw_schedule(a, "TPU v5e")
    svg = line.svg()
    routes = _routes(svg)
    entries = legend(svg)
    colours = {d: stroke(e) for d, e in entries["direction"].items()}
    wrapped = routes["0-3"]
    assert wrapped["line"] and wrapped["segments"] == ["0-1", "1-2", "2-3"] and wrapped["arcs"] == 0
    assert wrapped["direction"] == "+1" and wrapped["colour"] == colours["+1"] != colours["-1"]
    assert routes["4-7"]["segments"] == ["4-5", "5-6", "6-7"]
    neighbours = ("1-0", "2-1", "3-2", "5-4", "6-5", "7-6")
    assert all(routes[p]["segments"] == [p] and routes[p]["colour"] == colours["-1"] for p in neighbours)
    assert sum(len(r["segments"]) for r in routes.values()) == 2 * (3 + 3)
    links = [f"{r * 4 + k}-{r * 4 + k + 1}" for r in range(2) for k in range(3)]
    assert _link_bytes(svg) == {(link, way): 256 for link in links for way in ("+1", "-1")}
    assert "\u2192d3 through every link between" in words(entries["direction"]["+1"])
    assert all("along the line" in words(e) for e in entries["direction"].values())
    assert set(entries["label"]) == {"link-bytes"} and "256 B beside a link" in words(entries["label"]["link-bytes"])
    assert "(along the line: d0->d1->d2->d3, d4->d5->d6->d7)" in line.text()

    ring_svg = draw_schedule(a, RING_OF_4).svg()
    routes = _routes(ring_svg)
    wrapped = routes["0-3"]
    assert not wrapped["line"] and wrapped["segments"] == [] and wrapped["arcs"] == 1 and wrapped["wraparound"]
    assert wrapped["direction"] == "-1" and all(r["arcs"] == 0 for p, r in routes.items() if p not in ("0-3", "4-7"))
    labels = [g for g in ET.fromstring(ring_svg).iter(f"{SVG}g") if g.get("data-label") == "wraparound"]
    assert labels and all(words(g) == "wraparound link" for g in labels)
    assert _link_bytes(ring_svg) == {} and "label" not in legend(ring_svg)


def test_on_a_line_both_ways_load_each_link_as_one_way_does():
    """Both ways round the rings of 4 with half the bytes each way, on the v5e's line: each
    link direction carries a neighbour's half and a wrapped pair's half, the same 256 B as the
    one-way ring puts there; each wrapped pair crosses n - 1 = 3 links, and every pair is
    drawn in its way of travel's colour."""
    halves = RING.replace("f32[8,8]", "f32[8,4]")
    a = analyze_text(halves, (2, 4), ("X", "Y"))
    svg = draw_schedule(a, "TPU v5e").svg()
    routes = _routes(svg)
    colours = {d: stroke(e) for d, e in legend(svg)["direction"].items()}
    assert routes["0-3"]["segments"] == ["0-1", "1-2", "2-3"] and routes["3-0"]["segments"] == ["3-2", "2-1", "1-0"]
    assert all(r["colour"] == colours[r["direction"]] for r in routes.values())
    links = [f"{r * 4 + k}-{r * 4 + k + 1}" for r in range(2) for k in range(3)]
    assert _link_bytes(svg) == {(link, way): 2 * 128 for link in links for way in ("+1", "-1")}


def test_line_of_3_routes_and_labels_every_step(sol4):
    """The odd ring of problem4's lesson on 3 chips of a v5p (no wraparound: a line): in each
    step both wrapped pairs cross 2 links, and each link direction carries both halves."""
    mesh = assignments.make_mesh((1, 3))
    a = compiled(sol4.reducescatter_matmul_bidirectional, mesh, abstract(mesh, (4, 6), ("X", "Y")),
                 abstract(mesh, (6, 12), ("Y", None)), mesh=mesh)
    svg = draw_schedule(a, "TPU v5p", compact=True).svg()
    routes = _routes(svg)
    assert routes["2-0"]["segments"] == ["2-1", "1-0"] and routes["0-2"]["segments"] == ["0-1", "1-2"]
    half = a.collectives[0].bytes
    assert _link_bytes(svg) == {(link, way): 2 * half for link in ("0-1", "1-2") for way in ("+1", "-1")}


def test_profile_table_shows_collectives_in_bold(tmp_path):
    """Does the profile's table, as a notebook shows it, set its collectives' rows in bold
    (as its caption says) and no other row, with each opcode kept whole?"""
    import gzip

    from assignments.display import table_html, to_text
    from assignments.profiling import Profile, summary_table

    trace = tmp_path / "perfetto_trace.json.gz"
    events = [{"ph": "X", "name": name, "tid": tid, "dur": dur}
              for name, dur in (("ag", 40.0), ("late", 90.0), ("early", 30.0), ("cp", 20.0), ("beside", 10.0))
              for tid in (1, 2)]
    with gzip.open(trace, "wt") as f:
        json.dump({"traceEvents": events}, f)
    table = summary_table(Profile(str(trace), STRAIGHT, runs=1))
    assert "collectives in bold" in to_text(table)
    html = table_html(table)
    rows = {}
    for row in re.findall(r"<tr style='background:none'>(.*?)</tr>", html):
        cells = re.findall(r'<td style="([^"]*)">(.*?)</td>', row)
        rows[cells[1][1]] = [style for style, _ in cells]
    assert sorted(rows) == ["all-gather", "collective-permute", "dot"], rows
    assert {opcode for opcode, styles in rows.items() if all("font-weight:bold" in s for s in styles)} == \
        {"all-gather", "collective-permute"}, rows
    assert not any("font-weight:bold" in s for s in rows["dot"])
    assert all("white-space:nowrap" in styles[1] for styles in rows.values())


def test_check_and_report_show_the_steps(sol3, capsys):
    """Does a problem3 visible check end with the compact schedule beside plain jax.jit, and
    report() list the steps of a program that communicates (and none for one that does not)?"""
    assignments.check(sol3.allgather_matmul)
    shown = capsys.readouterr().out
    assert "step by step at mesh 2x4, B=1024, D=2048, F=8192" in shown
    assert "steps 1-3 (loop x3): collective-permute over Y (-1)" in shown
    assert re.search(r"plain jax.jit:.*step 1: all-gather over Y", shown, re.S)
    mesh = assignments.make_mesh((2, 4))
    x = jax.device_put(np.ones((8, 16), np.float32), NamedSharding(mesh, P("X", "Y")))
    assignments.report(lambda a: a.sum(axis=0), x)
    assert re.search(r"step 1: all-reduce over X, .*\{d0 d4\}", capsys.readouterr().out)
    assignments.report(lambda a: a * 2, x)
    assert "step by step" not in capsys.readouterr().out


# ---------------------------------------------------------------------------------------
# In a real JupyterLab, light and dark, 1024 px wide

LESSON_CELLS = [
    """import sys
sys.path.insert(0, SOLUTIONS)
import assignments
assignments.setup_devices(8)
import functools
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
import problem3, problem4
from assignments.costs import cube_slice
mesh = assignments.make_mesh((2, 4))

def abstract(shape, spec, on=mesh):
    return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(on, P(*spec)))

def plain_matmul(A, W):
    return jax.jit(lambda a, w: a @ w, out_shardings=NamedSharding(mesh, P('X', 'Y')))(A, W)""",
    # problem3's lesson: the one-way ring beside plain jax.jit, at the book's sizes
    """book_args = (abstract((1024, 2048), ('X', 'Y')), abstract((2048, 8192), (None, 'Y')))
assignments.show_schedule({"allgather_matmul": functools.partial(problem3.allgather_matmul, mesh=mesh),
                           "plain jax.jit": plain_matmul}, *book_args, chip="TPU v5e")""",
    # problem4's lesson: one way against both ways, where the links bound the ring
    """args = (abstract((1024, 1024), ('X', 'Y')), abstract((1024, 2048), ('Y', None)))
assignments.show_schedule({"one way": functools.partial(problem3.reducescatter_matmul, mesh=mesh),
                           "both ways": functools.partial(problem4.reducescatter_matmul_bidirectional, mesh=mesh)},
                          *args, chip=cube_slice("TPU v5p", (2, 4), ("X", "Y"), ring="Y"))""",
    # an odd ring, and the compact form the visible checks show
    """ring3 = assignments.make_mesh((1, 3))
args3 = (abstract((512, 768), ('X', 'Y'), ring3), abstract((768, 1536), ('Y', None), ring3))
assignments.show_schedule({"both ways, ring of 3": functools.partial(problem4.reducescatter_matmul_bidirectional, mesh=ring3)},
                          *args3, chip="TPU v5p", compact=True)""",
]


def _lesson_notebook(folder, repo_root) -> str:
    """The lesson cells, run by a kernel and signed as the student's own run would leave them."""
    import nbformat
    from nbclient import NotebookClient
    from nbformat.sign import NotebookNotary

    nb = nbformat.v4.new_notebook()
    first = f"SOLUTIONS = {os.path.join(repo_root, 'solutions')!r}\n"
    nb.cells = [nbformat.v4.new_code_cell(first * (i == 0) + c) for i, c in enumerate(LESSON_CELLS)]
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(folder)}}).execute()
    (folder / "data").mkdir(exist_ok=True)
    NotebookNotary(data_dir=str(folder / "data")).sign(nb)
    path = folder / "schedule.ipynb"
    nbformat.write(nb, str(path))
    return path.name


def _jupyterlab(folder):
    """JupyterLab on a free loopback port with its own settings: (process, base url, token)."""
    import secrets
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = secrets.token_hex(16)
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(folder / "config"), "JUPYTER_DATA_DIR": str(folder / "data"),
           "JUPYTER_RUNTIME_DIR": str(folder / "runtime"), "JUPYTERLAB_SETTINGS_DIR": str(folder / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(folder / "workspaces")}
    log = open(folder / "lab.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root",
                             "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
                             f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={folder}"],
                            cwd=str(folder), env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)  # its kernels in its process group, ended with it
    base = f"http://127.0.0.1:{port}"
    for _ in range(180):
        try:
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
            return proc, base, token
        except Exception:
            if proc.poll() is not None:
                break
            time.sleep(0.5)
    stop(proc)
    raise RuntimeError(f"jupyter lab did not start: {(folder / 'lab.log').read_text()[-2000:]}")


def _set_theme(folder, theme: str) -> None:
    settings = folder / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True, exist_ok=True)
    (settings / "themes.jupyterlab-settings").write_text(json.dumps({"theme": theme}))
    (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))


MEASURE = """() => {
  const rgba = c => { const v = c.match(/[\\d.]+/g).map(Number); return [v[0], v[1], v[2], v.length > 3 ? v[3] : 1]; };
  const over = (c, bg) => { const [r, g, b, a] = rgba(c), [R, G, B] = rgba(bg);
                            return [r * a + R * (1 - a), g * a + G * (1 - a), b * a + B * (1 - a)]; };
  const lum = v => v.map(x => x / 255).map(x => x <= 0.03928 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4)
                    .reduce((s, x, i) => s + [0.2126, 0.7152, 0.0722][i] * x, 0);
  const contrast = (c, bg) => { const [x, y] = [lum(over(c, bg)), lum(rgba(bg).slice(0, 3))].sort((p, q) => q - p);
                                return (x + 0.05) / (y + 0.05); };
  // a fill or stroke as drawn: its colour, times its own opacity (secondary text is fainter)
  const painted = (e, prop) => { const s = getComputedStyle(e), [r, g, b, a] = rgba(s[prop]);
                                 return `rgba(${r}, ${g}, ${b}, ${a * parseFloat(s[prop + 'Opacity'])})`; };
  return [...document.querySelectorAll('svg.kit-schedule')].map(svg => {
    let bg = 'rgb(255, 255, 255)';
    for (let e = svg; e; e = e.parentElement) {
      const b = getComputedStyle(e).backgroundColor;
      if (b && b !== 'rgba(0, 0, 0, 0)' && b !== 'transparent') { bg = b; break; }
    }
    const area = svg.closest('.jp-OutputArea-output');
    const lines = [...svg.querySelectorAll('g.arrow path, g.group rect, g.group polygon')];
    const least = (els, prop) => Math.min(...els.map(e => contrast(painted(e, prop), bg)));
    const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
    const texts = [...svg.querySelectorAll('text')];
    return {width: svg.getBoundingClientRect().width, scale: scale, area: area.clientWidth, scroll: area.scrollWidth,
            background: bg, text: least(texts, 'fill'), lines: lines.length ? least(lines, 'stroke') : null,
            font: Math.min(...texts.map(t => parseFloat(getComputedStyle(t).fontSize) * scale)),
            code: parseFloat(getComputedStyle(area).getPropertyValue('--jp-code-font-size'))};
  });
}"""


@pytest.mark.browser
@pytest.mark.slow
def test_schedule_reads_in_jupyterlab_light_and_dark(busy_shared_memory, tmp_path, repo_root):
    """In JupyterLab at 1024 px with the file browser open, in the light and the dark theme:
    is every schedule picture drawn whole inside its output area, at its own size, its text at
    the output's body size, text and arrows in readable contrast? Screenshots go to
    build/screenshots/schedule/."""
    import shutil

    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "Debian's chromium is needed: apt-get install -y chromium"
    shots = os.path.join(os.environ.get("SCREENSHOTS") or os.path.join(repo_root, "build", "screenshots"), "schedule")
    os.makedirs(shots, exist_ok=True)
    notebook = _lesson_notebook(tmp_path, repo_root)
    proc, base, token = _jupyterlab(tmp_path)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=[
                "--headless", "--no-sandbox", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--no-first-run", "--disable-quic"])
            # tall enough that the tallest picture (two programs, three steps each) is screenshot whole
            page = browser.new_page(viewport={"width": 1024, "height": 1700})
            for theme in ("JupyterLab Light", "JupyterLab Dark"):
                _set_theme(tmp_path, theme)
                page.goto(f"{base}/lab/tree/{notebook}?token={token}")
                page.wait_for_function(f"() => document.body.dataset.jpThemeName === {theme!r}", timeout=90000)
                page.wait_for_selector("svg.kit-schedule", timeout=90000)
                if page.locator("#jp-left-stack").is_hidden():   # the file browser open, as students keep it
                    page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab").first.click()
                page.locator("#jp-left-stack").wait_for(state="visible")
                page.wait_for_timeout(1000)                       # the notebook laid out again beside it
                outputs = page.locator(".jp-OutputArea-output:has(svg.kit-schedule)")
                assert outputs.count() == 3
                name = theme.split()[-1].lower()
                for i in range(outputs.count()):
                    outputs.nth(i).scroll_into_view_if_needed()
                    outputs.nth(i).screenshot(path=os.path.join(shots, f"{name}-{i + 1}.png"))
                measured = page.evaluate(MEASURE)
                print(theme, measured)
                for m in measured:
                    assert m["area"] < 700, m                      # the narrow case: 1024 px, sidebar open
                    assert m["width"] <= m["area"] + 1 and m["scroll"] <= m["area"] + 2, (theme, m)
                    # text at the size of the printed output above it (the checks' messages)
                    assert m["scale"] == 1 and m["font"] >= m["code"] == 13, (theme, m)
                    assert m["text"] >= 4.5 and m["lines"] >= 3.0, (theme, m)   # WCAG: text, then graphics
            browser.close()
    finally:
        stop(proc, timeout=30)  # SIGTERM to the group; SIGKILL if a busy machine keeps it past 30 s
