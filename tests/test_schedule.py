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
from assignments.costs import estimate, pipelined_seconds
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


def test_picture_uses_theme_colours_and_fits(sol3, sol4, mesh_2x4):
    """Is every colour a JupyterLab theme variable (with a fallback), and is the picture no
    wider than a notebook at 1024 px, with the student's and plain jax.jit's tiles side by side?"""
    args = (abstract(mesh_2x4, (8, 16), ("X", "Y")), abstract(mesh_2x4, (16, 32), (None, "Y")))
    schedule = draw_schedule({"allgather_matmul": compiled(sol3.allgather_matmul, mesh_2x4, *args, mesh=mesh_2x4),
                              "plain jax.jit": compiled(lambda a, w: a @ w, mesh_2x4, *args)}, compact=True)
    svg = schedule.svg()
    root = ET.fromstring(svg)
    assert float(root.get("width")) <= WIDTH <= 700 and "max-width:100%" in root.get("style")
    colours = re.findall(r"(?:fill|stroke):([^;\"]+)", svg)
    assert colours and all(c == "none" or re.fullmatch(r"var\(--jp-[\w-]+, #[0-9a-f]{6}\)", c) for c in colours), \
        sorted(set(colours))
    names = [(e.text, float(e.get("x"))) for e in root.iter(f"{SVG}text") if e.get("class") == "program"]
    assert [n for n, _ in names] == ["allgather_matmul", "plain jax.jit"] and names[1][1] > names[0][1]


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
                          *args, chip="TPU v5p")""",
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
  return [...document.querySelectorAll('svg.kit-schedule')].map(svg => {
    let bg = 'rgb(255, 255, 255)';
    for (let e = svg; e; e = e.parentElement) {
      const b = getComputedStyle(e).backgroundColor;
      if (b && b !== 'rgba(0, 0, 0, 0)' && b !== 'transparent') { bg = b; break; }
    }
    const area = svg.closest('.jp-OutputArea-output');
    const lines = [...svg.querySelectorAll('g.arrow path, g.group rect, g.group polygon')];
    const least = (els, prop) => Math.min(...els.map(e => contrast(getComputedStyle(e)[prop], bg)));
    return {width: svg.getBoundingClientRect().width, scale: svg.getBoundingClientRect().width / svg.viewBox.baseVal.width,
            area: area.clientWidth, scroll: area.scrollWidth, background: bg,
            text: least([...svg.querySelectorAll('text')], 'fill'), lines: lines.length ? least(lines, 'stroke') : null};
  });
}"""


@pytest.mark.browser
@pytest.mark.slow
def test_schedule_reads_in_jupyterlab_light_and_dark(busy_shared_memory, tmp_path, repo_root):
    """In JupyterLab at 1024 px with the file browser open, in the light and the dark theme:
    is every schedule picture drawn whole inside its output area, at nearly its own size, with
    text and arrows in readable contrast? Screenshots go to build/screenshots/schedule/."""
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
            page = browser.new_page(viewport={"width": 1024, "height": 900})
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
                    assert m["scale"] >= 0.85, (theme, m)       # its 10-11 px text stays readable
                    assert m["text"] >= 4.5 and m["lines"] >= 3.0, (theme, m)   # WCAG: text, then graphics
            browser.close()
    finally:
        stop(proc, timeout=30)  # SIGTERM to the group; SIGKILL if a busy machine keeps it past 30 s
