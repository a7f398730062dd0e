"""The schedule, drawn: which device sends what to whom, step by step, and how long it takes.

`show_schedule(fn, *args, baseline=...)` compiles a function (and, beside it, the plain
`jax.jit` version) and draws what the compiled program communicates:

- for every step (`assignments.steps`: a loop's iterations, the code around them), the mesh
  as a grid of devices, each collective-permute as arrows from source to target (blue towards
  lower positions along the axis, red towards higher), the other collectives as outlines
  around the groups of devices that act together, and the bytes each device sends;
- a loop of many iterations as its first few, then one box for the rest;
- a timeline on one time scale for all programs: when the links and the matrix units are busy,
  step by step, from the cost model (`assignments.costs`: the book's figures for a chip).

In a notebook it is one SVG picture whose colours are JupyterLab's theme variables (light
and dark); anywhere else, the same content as a list of steps. `draw_schedule` draws analyses
you already have (`assignments.analyze`, or the graders' JSON).
"""
from __future__ import annotations

import dataclasses
import html
import math

import numpy as np

from .display import BORDER, COLORS, DIM, FONT
from .hlo import Collective, ProgramAnalysis
from .steps import TimedStage, Timeline, timeline

UNROLL = 3
"""Iterations of a loop drawn one by one; the rest become one box (all of them when only one
more would be left)."""
WIDTH = 640
"""The picture's width in pixels: about what a notebook's output area has at a 1024 px wide
window with the file browser open (the picture shrinks with a narrower one)."""
TEXT = "var(--jp-content-font-color1, #212121)"
FAINT = "var(--jp-border-color2, #e0e0e0)"
CELL_FILL = "var(--jp-layout-color2, #eeeeee)"
COMPUTE_FILL = "var(--jp-content-font-color3, #9e9e9e)"
NETWORK_FILL = COLORS["cyan"]
# Lines and labels need 3:1 against the page in both themes (JupyterLab's orange and cyan have
# less on white), so the second colour of a ring and the all-to-all's are the code editor's.
TOWARDS_LOWER, TOWARDS_HIGHER, ACROSS = COLORS["blue"], "var(--jp-mirror-editor-string-color, #ba2121)", TEXT
PURPLE = "var(--jp-mirror-editor-operator-color, #7800c2)"
GROUP_COLORS = {"all-gather": COLORS["blue"], "reduce-scatter": COLORS["green"], "all-reduce": COLORS["green"],
                "all-to-all": PURPLE, "ragged-all-to-all": PURPLE}
CHAR = 0.6
"""Width of a monospace character, in units of its font size."""


def _bytes(n: float) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


def _time(s: float, digits: str = ",.1f") -> str:
    if s == 0:
        return "0"
    for unit, size in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= size:
            return f"{s / size:{digits}} {unit}"
    return f"{s * 1e9:{digits}} ns"


def _esc(text: str) -> str:
    return html.escape(str(text), quote=True)


def _label(c: Collective, short: bool = False) -> str:
    """e.g. "collective-permute over Y (-1)" ("permute ..." when `short`) or "all-gather over Y"."""
    kind = "permute" if short and c.kind == "collective-permute" else c.priced_kind
    kind += "*" if c.accelerator_kind else ""
    axes = "+".join(c.axes) or "no axis"
    ways = f" ({', '.join(f'{d:+d}' for d in c.directions)})" if c.directions else ""
    return f"{kind} over {axes}{ways}"


def _moves(c: Collective) -> str:
    """What each device sends (and, for an all-gather, ends with)."""
    if c.kind == "all-gather":
        return f"{_bytes(c.bytes)} in, {_bytes(sum(r.bytes for r in c.results))} out per device"
    return f"{_bytes(c.bytes)} from each device"


# ---------------------------------------------------------------------------------------
# The steps to draw


@dataclasses.dataclass(frozen=True)
class Tile:
    """One panel: a step of a program, or a box standing for the iterations not drawn."""

    program: str
    stage: TimedStage
    step: int
    """The step's index within its stage; -1 for a box of the iterations not drawn, -2 for a
    stretch of matmuls with no communication (listed in the text form only)."""
    first: int
    """Number of the (first) step it shows, counted from 1 over the whole execution."""
    iteration: int
    """The loop iteration shown (from 1), or the first of those a box stands for."""
    more: int | None = 0
    """Iterations a box stands for (None: as many as the run decides); 0 for a step."""


def _tiles(name: str, tl: Timeline, compact: bool, with_compute: bool = False) -> list[Tile]:
    """The steps drawn for one program: every step of straight-line code; a loop's first
    `UNROLL` iterations and a box for the rest (compact: one iteration, standing for all).
    With `with_compute`, a stretch of matmuls with no communication gets a tile too."""
    tiles, number = [], 1
    for stage in tl.stages:
        per_run, runs = len(stage.steps), stage.runs
        if not per_run:
            if with_compute and stage.step_seconds("compute") > 0:
                tiles.append(Tile(name, stage, -2, number, 1))
            continue
        shown = 1 if compact or runs is None else runs if runs <= UNROLL + 1 else UNROLL
        for it in range(min(shown, runs or 1)):
            tiles += [Tile(name, stage, k, number + it * per_run + k, it + 1) for k in range(per_run)]
        if not compact and (runs is None or runs > shown):
            tiles.append(Tile(name, stage, -1, number + shown * per_run, shown + 1,
                              None if runs is None else runs - shown))
        number += per_run * (runs or 1)
    return tiles


def _tile_heading(t: Tile, compact: bool) -> str:
    runs = t.stage.runs
    if t.step < 0:
        return f"x {t.more} more like this" if t.more is not None else "repeats as the run decides"
    if not t.stage.stage.loop or runs == 1:
        return f"step {t.first}"
    per_run = len(t.stage.steps)
    if compact:
        if runs is None:  # no last step to name: the run decides how many there are
            span = f"steps {t.first}.." if per_run == 1 else f"steps {t.first}, {t.first + per_run}.."
            return f"{span} (loop x?)"
        last = t.first + per_run * (runs - 1)
        span = f"steps {t.first}-{last}" if per_run == 1 else f"steps {t.first}, {t.first + per_run}.. {last}"
        return f"{span} (loop x{runs})"
    return f"step {t.first} (loop {t.iteration}/{runs if runs is not None else '?'})"


def _tile_lines(analysis: ProgramAnalysis, t: Tile) -> list[tuple[str, str]]:
    """(text, colour) lines under a tile: each collective, then the step's times."""
    if t.step < 0:
        per_run = len(t.stage.steps)
        if t.more is None:
            return [(f"steps {t.first}..", DIM), ("as many as the run decides", DIM)]
        return [(f"steps {t.first}-{t.first + t.more * per_run - 1}", DIM), ("the same as above", DIM)]
    lines = []
    for i in t.stage.steps[t.step]:
        c = analysis.collectives[i]
        colour = _permute_colour(c) if c.kind == "collective-permute" else GROUP_COLORS.get(c.priced_kind, ACROSS)
        lines.append((_label(c, short=True), colour))
        lines.append((_moves(c), DIM))
    comm = t.stage.step_seconds("network", t.step)
    compute = t.stage.step_compute(t.step)
    if not compute:
        return lines + [(f"links {_time(comm)}", TEXT), ("no matmul in this step", DIM)]
    together = "at the same time" if t.stage.step_overlaps(t.step) else "one after the other"
    return lines + [(f"links {_time(comm)}, matmul {_time(compute)}", TEXT), (together, DIM)]


# ---------------------------------------------------------------------------------------
# The mesh, with arrows and groups


@dataclasses.dataclass(frozen=True)
class Grid:
    """Where each device sits in a tile: rows along the mesh's first axis, columns along
    its last (as `assignments.show_mesh` draws it)."""

    rows: int
    cols: int
    cell: int = 22
    bulge: int = 10
    gap: int = 22
    """Between neighbours, for their arrows (arcs of longer jumps need more)."""

    @classmethod
    def of(cls, analysis: ProgramAnalysis) -> "Grid":
        shape = analysis.mesh_shape or (1, analysis.num_devices)
        rows, cols = int(np.prod(shape[:-1], dtype=int)) if len(shape) > 1 else 1, int(shape[-1])
        small = max(rows, cols) > 4   # 8 in a line: smaller cells, so that two tiles fit a row
        return cls(rows, cols, cell=20 if small else 22, gap=14 if small else 22)

    @property
    def gap_x(self) -> int:
        return max(2 * self.bulge + 8, self.gap) if self.rows > 2 else self.gap

    @property
    def gap_y(self) -> int:
        return max(2 * self.bulge + 10, self.gap) if self.cols > 2 else self.gap

    @property
    def pad(self) -> int:
        return self.bulge + 8

    @property
    def width(self) -> int:
        return 2 * self.pad + self.cols * self.cell + (self.cols - 1) * self.gap_x

    @property
    def height(self) -> int:
        return 2 * self.pad + self.rows * self.cell + (self.rows - 1) * self.gap_y

    def place(self, device: int) -> tuple[int, int]:
        return divmod(device, self.cols) if 0 <= device < self.rows * self.cols else (0, 0)

    def center(self, device: int) -> tuple[float, float]:
        r, c = self.place(device)
        return (self.pad + c * (self.cell + self.gap_x) + self.cell / 2,
                self.pad + r * (self.cell + self.gap_y) + self.cell / 2)


def _ring_step(c: Collective, grid: Grid, s: int, t: int) -> int:
    """The signed ring step of one pair along the axis it runs on (0 if it runs across both)."""
    (r1, c1), (r2, c2) = grid.place(s), grid.place(t)
    if r1 == r2:
        n, d = grid.cols, c2 - c1
    elif c1 == c2:
        n, d = grid.rows, r2 - r1
    else:
        return 0
    d %= n
    return d if d <= n // 2 else d - n


def _permute_colour(c: Collective) -> str:
    if len(c.directions) != 1:
        return ACROSS
    return TOWARDS_LOWER if c.directions[0] < 0 else TOWARDS_HIGHER


def _arrow_head(x: float, y: float, dx: float, dy: float, colour: str) -> str:
    norm = math.hypot(dx, dy) or 1.0
    ux, uy = dx / norm, dy / norm
    size = 6.0
    points = [(x, y), (x - size * ux + size * 0.5 * uy, y - size * uy - size * 0.5 * ux),
              (x - size * ux - size * 0.5 * uy, y - size * uy + size * 0.5 * ux)]
    return (f'<polygon points="{" ".join(f"{px:.1f},{py:.1f}" for px, py in points)}" '
            f'style="fill:{colour};stroke:none"/>')


def _arrow(grid: Grid, c: Collective, s: int, t: int) -> str:
    """A pair's path: straight between neighbours (towards lower positions above the centre
    line, towards higher below it), an arc past the devices in between for longer jumps."""
    (r1, c1), (r2, c2) = grid.place(s), grid.place(t)
    (x1, y1), (x2, y2) = grid.center(s), grid.center(t)
    step, half = _ring_step(c, grid, s, t), grid.cell / 2
    colour = ACROSS if step == 0 else (TOWARDS_LOWER if step < 0 else TOWARDS_HIGHER)
    if r1 == r2 and abs(c2 - c1) == 1 or c1 == c2 and abs(r2 - r1) == 1:
        horizontal = r1 == r2
        sign = (c2 - c1) if horizontal else (r2 - r1)
        off = 5 * sign                                   # lower positions: up (or left)
        if horizontal:
            x1, x2, y1, y2 = x1 + sign * half, x2 - sign * half, y1 + off, y2 + off
        else:
            x1, x2, y1, y2 = x1 + off, x2 + off, y1 + sign * half, y2 - sign * half
        path, tangent = f"M{x1:.1f},{y1:.1f} L{x2:.1f},{y2:.1f}", (x2 - x1, y2 - y1)
    elif r1 == r2 or c1 == c2:
        side = -1 if step < 0 else 1                      # above (left of) the row for lower
        span = abs(c2 - c1) if r1 == r2 else abs(r2 - r1)
        depth = half + 2 * grid.bulge * min(1.0, 0.55 + 0.15 * span)
        if r1 == r2:
            x1, x2 = x1 + 3 * side, x2 + 3 * side
            y1, y2 = y1 + side * half, y2 + side * half
            cx, cy = (x1 + x2) / 2, y1 - side * half + side * depth
        else:
            y1, y2 = y1 + 3 * side, y2 + 3 * side
            x1, x2 = x1 + side * half, x2 + side * half
            cx, cy = x1 - side * half + side * depth, (y1 + y2) / 2
        path, tangent = f"M{x1:.1f},{y1:.1f} Q{cx:.1f},{cy:.1f} {x2:.1f},{y2:.1f}", (x2 - cx, y2 - cy)
    else:                                                # across both axes: a straight line
        dx, dy = x2 - x1, y2 - y1
        k = half / max(abs(dx), abs(dy), 1e-9)
        x1, y1, x2, y2 = x1 + k * dx, y1 + k * dy, x2 - k * dx, y2 - k * dy
        path, tangent = f"M{x1:.1f},{y1:.1f} L{x2:.1f},{y2:.1f}", (dx, dy)
    return (f'<g class="arrow" data-pair="{s}-{t}"><title>d{s} -&gt; d{t}: {_esc(_bytes(c.bytes))}</title>'
            f'<path d="{path}" style="fill:none;stroke:{colour};stroke-width:1.6"/>'
            f'{_arrow_head(x2, y2, *tangent, colour)}</g>')


def _group(grid: Grid, c: Collective, members: tuple[int, ...], ring: int) -> str:
    """An outline around one group: a rounded box when its devices fill a rectangle of the
    grid, else a dashed loop through them. `ring` moves it outwards (several collectives)."""
    colour = GROUP_COLORS.get(c.priced_kind, ACROSS)
    places = [grid.place(d) for d in members]
    rows, cols = {r for r, _ in places}, {c_ for _, c_ in places}
    title = f"<title>{_esc(_label(c))}: {' '.join(f'd{d}' for d in members)}</title>"
    data = f'class="group" data-group="{",".join(map(str, members))}"'
    if len(set(places)) == len(rows) * len(cols) and max(rows) - min(rows) + 1 == len(rows) \
            and max(cols) - min(cols) + 1 == len(cols):
        (x1, y1), (x2, y2) = grid.center(members[0]), grid.center(members[0])
        for d in members:
            x, y = grid.center(d)
            x1, y1, x2, y2 = min(x1, x), min(y1, y), max(x2, x), max(y2, y)
        pad = grid.cell / 2 + 4 + 3 * ring
        return (f'<g {data}>{title}<rect x="{x1 - pad:.1f}" y="{y1 - pad:.1f}" width="{x2 - x1 + 2 * pad:.1f}" '
                f'height="{y2 - y1 + 2 * pad:.1f}" rx="7" style="fill:none;stroke:{colour};stroke-width:2"/></g>')
    points = " ".join(f"{x:.1f},{y:.1f}" for x, y in map(grid.center, members))
    return (f'<g {data}>{title}<polygon points="{points}" style="fill:none;stroke:{colour};'
            f'stroke-width:2;stroke-dasharray:4 3"/></g>')


def pairs_of(analysis: ProgramAnalysis, c: Collective) -> tuple[tuple[int, int], ...]:
    """A permute's (source, target) pairs; for an analysis that did not record them (older
    JSON), rebuilt from its one ring offset along its one axis."""
    if c.pairs or len(c.axes) != 1 or len(c.shifts) != 1 or c.axes[0] not in analysis.axis_names:
        return c.pairs
    ids = np.arange(int(np.prod(analysis.mesh_shape))).reshape(analysis.mesh_shape)
    axis = analysis.axis_names.index(c.axes[0])
    targets = np.roll(ids, -c.shifts[0], axis=axis)   # targets[j] = ids[j + shift]
    return tuple((int(s), int(t)) for s, t in zip(ids.flat, targets.flat))


def groups_of(analysis: ProgramAnalysis, c: Collective) -> tuple[tuple[int, ...], ...]:
    """The groups a collective acts on; for an analysis that did not record them (older
    JSON), the devices that differ only along its axes."""
    if c.groups or not analysis.mesh_shape or not set(c.axes) <= set(analysis.axis_names):
        return c.groups or (tuple(range(analysis.num_devices)),)
    ids = np.arange(int(np.prod(analysis.mesh_shape))).reshape(analysis.mesh_shape)
    moved = [analysis.axis_names.index(a) for a in c.axes]
    ids = np.moveaxis(ids, moved, list(range(ids.ndim - len(moved), ids.ndim)))
    return tuple(tuple(int(d) for d in g) for g in ids.reshape(-1, c.group_size))


def _mesh(analysis: ProgramAnalysis, grid: Grid, collectives: tuple[int, ...]) -> str:
    """The devices of one tile, then each collective of its step drawn over them."""
    parts = []
    for d in range(grid.rows * grid.cols):
        x, y = grid.center(d)
        parts.append(f'<rect x="{x - grid.cell / 2:.1f}" y="{y - grid.cell / 2:.1f}" width="{grid.cell}" '
                     f'height="{grid.cell}" rx="3" style="fill:{CELL_FILL};stroke:{BORDER}"/>'
                     f'<text x="{x:.1f}" y="{y + 3.5:.1f}" text-anchor="middle" '
                     f'style="font-size:10px;fill:{TEXT}">d{d}</text>')
    for ring, i in enumerate(collectives):
        c = analysis.collectives[i]
        body = ([_arrow(grid, c, s, t) for s, t in pairs_of(analysis, c)] if c.kind == "collective-permute"
                else [_group(grid, c, g, ring) for g in groups_of(analysis, c) if g])
        parts.append(f'<g class="collective" data-collective="{i}" data-kind="{_esc(c.kind)}">{"".join(body)}</g>')
    return "".join(parts)


# ---------------------------------------------------------------------------------------
# The picture


def _text_at(x: float, y: float, text: str, colour: str = TEXT, size: int = 11, weight: str = "normal",
             anchor: str = "start", cls: str = "") -> str:
    c = f' class="{cls}"' if cls else ""
    return (f'<text{c} x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" '
            f'style="font-size:{size}px;font-weight:{weight};fill:{colour}">{_esc(text)}</text>')


def _fit(text: str, width: float, size: int = 11) -> str:
    most = max(4, int(width / (CHAR * size)))
    return text if len(text) <= most else text[: most - 1] + "\u2026"


@dataclasses.dataclass(frozen=True)
class _Box:
    """A tile's size."""

    width: int
    height: int
    lines: int


def _tile_svg(analysis: ProgramAnalysis, t: Tile, x: float, y: float, box: _Box, compact: bool) -> str:
    grid = Grid.of(analysis)
    out = [f'<g class="tile" data-program="{_esc(t.program)}" data-step="{t.first}" '
           f'data-more="{"" if t.step >= 0 else (t.more if t.more is not None else "?")}" '
           f'transform="translate({x:.1f},{y:.1f})">',
           f'<rect width="{box.width}" height="{box.height}" rx="5" style="fill:none;stroke:{FAINT}'
           f'{";stroke-dasharray:5 4" if t.step < 0 else ""}"/>',
           _text_at(8, 15, _fit(_tile_heading(t, compact), box.width - 12), weight="bold")]
    top = 20
    if t.step >= 0:
        out.append(f'<g transform="translate({(box.width - grid.width) / 2:.1f},{top})">'
                   f'{_mesh(analysis, grid, t.stage.steps[t.step])}</g>')
    else:
        out.append(_text_at(box.width / 2, top + grid.height / 2, "\u22ee", DIM, 20, anchor="middle"))
    for k, (text, colour) in enumerate(_tile_lines(analysis, t)):
        out.append(_text_at(8, top + grid.height + 12 + 13 * k, _fit(text, box.width - 12, 10), colour, 10))
    return "".join(out) + "</g>"


def _layout(groups: list[tuple[str, list[Tile]]], box: _Box, width: int) -> tuple[list[tuple], int]:
    """Tiles flow left to right and wrap; a program starts a new row unless all its tiles fit
    beside the last one's, and carries its name above its first tile.
    Returns ((kind, item, x, y), ...) and the height used."""
    gap, head = 10, 18
    placed, x, y, row_h = [], 0, 0, 0
    for name, tiles in groups:
        if not tiles:
            continue
        if x > 0 and x + len(tiles) * (box.width + gap) - gap > width:
            x, y, row_h = 0, y + row_h + gap, 0
        placed.append(("name", name, x, y + 13))
        for t in tiles:
            if x > 0 and x + box.width > width:
                x, y, row_h = 0, y + row_h + gap, 0
            placed.append(("tile", t, x, y + head))
            x += box.width + gap
            row_h = max(row_h, head + box.height)
    return placed, (y + row_h if placed else 0)


def _ticks(total: float) -> list[float]:
    if total <= 0:
        return [0.0]
    raw = total / 4
    base = 10 ** math.floor(math.log10(raw))
    step = next(m * base for m in (1, 2, 2.5, 5, 10) if m * base >= raw)
    return [k * step for k in range(int(total / step + 1e-9) + 1)]


def _bar(bar, x: float, y: float, scale: float, lane_h: int, number: int | None) -> str:
    """One bar of the timeline; a network bar carries its step's number when it fits."""
    w = max(bar.seconds * scale, 1.0)
    fill = NETWORK_FILL if bar.lane == "network" else COMPUTE_FILL
    out = (f'<rect class="bar" data-lane="{bar.lane}" x="{x:.2f}" y="{y:.1f}" width="{w:.2f}" height="{lane_h}" '
           f'style="fill:{fill};fill-opacity:0.75;stroke:{TEXT};stroke-opacity:0.35;stroke-width:0.5"/>')
    if number is not None and w >= 6 * len(str(number)) + 4:
        out += _text_at(x + w / 2, y + lane_h - 3, str(number), TEXT, 9, anchor="middle")
    return out


def _stage_bars(stage: TimedStage, t0: float, first: int, x0: float, y: float, scale: float, lane_h: int) -> str:
    """Every run of one stage (the first 200 of a longer loop), from time t0."""
    out = []
    if (stage.runs or 1) > 1 or stage.runs is None:
        out.append(_text_at(x0 + t0 * scale, y - 3, f"x{stage.runs if stage.runs else '?'}", DIM, 9))
    for r in range(min(stage.runs or 1, 200)):
        for bar in stage.bars:
            lane = 0 if bar.lane == "network" else 1
            number = first + r * len(stage.steps) + bar.step if bar.step >= 0 else None
            out.append(_bar(bar, x0 + (t0 + r * stage.run_s + bar.start_s) * scale, y + lane * (lane_h + 3),
                            scale, lane_h, number))
    return "".join(out)


def _timeline_svg(timelines: dict[str, Timeline], y0: float, width: int) -> tuple[str, int]:
    """Two lanes per program (links, matrix units) on one time scale; loops repeat their runs."""
    x0, lane_h, right = 58, 13, 64
    end = max((tl.total_s for tl in timelines.values()), default=0.0) or 1e-12
    scale = (width - x0 - right) / end
    height = 20 + len(timelines) * (26 + 2 * lane_h + 8)
    out = [_text_at(0, y0 + 12, "timeline (estimate: each loop iteration starts when the last ends)", weight="bold")]
    for tick in _ticks(end):  # the grid first, behind the bars
        x = x0 + tick * scale
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y0 + 20}" y2="{y0 + height}" style="stroke:{FAINT}"/>')
        out.append(_text_at(x, y0 + height + 11, _time(tick, "g"), DIM, 9, anchor="middle"))
    y = y0 + 20
    for name, tl in timelines.items():
        out.append(f'<g class="timeline" data-program="{_esc(name)}">')
        out.append(_text_at(x0, y + 11, _fit(name, width - x0), TEXT, 10, weight="bold"))
        y += 26
        for k, lane in enumerate(("links", "compute")):
            out.append(_text_at(x0 - 6, y + k * (lane_h + 3) + 10, lane, DIM, 10, anchor="end"))
        t0, first = 0.0, 1
        for stage in tl.stages:
            out.append(_stage_bars(stage, t0, first, x0, y, scale, lane_h))
            t0 += stage.total_s
            first += len(stage.steps) * (stage.runs or 1)
        total = _time(tl.total_s) + (" +" if tl.unknown_runs else "")
        out.append(_text_at(x0 + t0 * scale + 6, y + lane_h + 2, total, TEXT, 10) + "</g>")
        y += 2 * lane_h + 8
    return "".join(out), int(height + 14)


def _legend(y: float) -> str:
    items = [(TOWARDS_LOWER, "permute to a lower position"), (TOWARDS_HIGHER, "to a higher one"),
             (NETWORK_FILL, "links busy"), (COMPUTE_FILL, "matmuls")]
    out, x = [], 0.0
    for colour, text in items:
        out.append(f'<rect x="{x:.1f}" y="{y - 8:.1f}" width="12" height="8" style="fill:{colour}"/>')
        out.append(_text_at(x + 16, y, text, DIM, 10))
        x += 16 + len(text) * CHAR * 10 + 14
    return "".join(out)


def _tile_text(analysis: ProgramAnalysis, t: Tile, compact: bool) -> str:
    """One step as a line of text: what moves between which devices, and its times."""
    if t.step == -2:
        return f"then: matmul {_time(t.stage.step_seconds('compute'))}, no communication"
    if t.step < 0:
        return f"steps {t.first}..: {_tile_heading(t, compact)}"
    parts = []
    for i in t.stage.steps[t.step]:
        c = analysis.collectives[i]
        who = (" ".join(f"d{s}->d{d}" for s, d in pairs_of(analysis, c)) if c.kind == "collective-permute"
               else " ".join("{" + " ".join(f"d{d}" for d in g) + "}" for g in groups_of(analysis, c)))
        parts.append(f"{_label(c)}, {_moves(c)}: {who}")
    times = ", ".join(text for text, _ in _tile_lines(analysis, t)[-2:] if text)
    return f"{_tile_heading(t, compact)}: " + "; ".join(parts) + f"; {times}"


@dataclasses.dataclass(frozen=True)
class Schedule:
    """The steps of one or more compiled programs on one slice, drawn (`svg`, in a notebook)
    or listed (`text`, anywhere else)."""

    analyses: dict[str, ProgramAnalysis]
    timelines: dict[str, Timeline]
    compact: bool = False
    """One iteration of each loop standing for all of them (the visible checks' form)."""
    title: str = "What each device sends, step by step"

    def tiles(self, name: str, with_compute: bool = False) -> list[Tile]:
        return _tiles(name, self.timelines[name], self.compact, with_compute)

    def notes(self) -> list[str]:
        """What the picture simplifies, said under it."""
        notes = []
        for name, a in self.analyses.items():
            for c in a.collectives:
                note = (f"* XLA:CPU wrote an {c.kind} + dynamic-slice: drawn and priced as the "
                        f"{c.accelerator_kind} a GPU or TPU runs")
                if c.accelerator_kind and note not in notes:
                    notes.append(note)
            tl = self.timelines[name]
            if tl.compute_s > 0 and tl.placed_compute_s == 0:
                notes.append(f"{name}: no matmul, so its {_time(tl.compute_s)} of compute (memory traffic) "
                             f"is not on the timeline")
            if tl.unknown_runs:
                notes.append(f"{name}: a loop whose trip count the run decides is timed once: + marks "
                             f"a lower bound")
        return notes

    @property
    def slice(self) -> str:
        return next(iter(self.timelines.values())).slice if self.timelines else ""

    @property
    def slice_short(self) -> str:
        """e.g. "TPU v5p 2x4 slice: X a line of 2, Y a ring of 4"."""
        return next(iter(self.timelines.values())).slice_short if self.timelines else ""

    def _box(self) -> _Box:
        lines = max((len(_tile_lines(self.analyses[n], t)) for n in self.analyses for t in self.tiles(n)), default=1)
        grids = [Grid.of(a) for a in self.analyses.values()] or [Grid(1, 1)]
        width = max(max(g.width for g in grids) + 16, 206)
        return _Box(width, 24 + max(g.height for g in grids) + 4 + 13 * lines, lines)

    def svg(self, width: int = WIDTH) -> str:
        """The picture: the tiles of every program, then their timelines on one scale."""
        box = self._box()
        body = [_text_at(0, 14, self.title, weight="bold", size=12),
                _text_at(0, 30, _fit(f"times on a {self.slice_short} (the book's model, not a measurement)", width, 10),
                         DIM, 10)]
        placed, height = _layout([(n, self.tiles(n)) for n in self.analyses], box, width)
        y0 = 42
        for kind, item, x, y in placed:
            if kind == "name":
                body.append(_text_at(x, y0 + y, _fit(item, width - x), weight="bold", cls="program"))
            else:
                body.append(_tile_svg(self.analyses[item.program], item, x, y0 + y, box, self.compact))
        lanes, lanes_h = _timeline_svg(self.timelines, y0 + height + 10, width)
        total_h = y0 + height + 10 + lanes_h + 16
        body += [lanes, _legend(total_h - 4)]
        for note in self.notes():
            total_h += 14
            body.append(_text_at(0, total_h - 4, _fit(note, width, 10), DIM, 10, cls="note"))
        return (f'<svg xmlns="http://www.w3.org/2000/svg" class="kit-schedule" viewBox="0 0 {width} {total_h:.0f}" '
                f'width="{width}" height="{total_h:.0f}" role="img" aria-label="{_esc(self.title)}" '
                f'style="max-width:100%;height:auto;font-family:{FONT}">{"".join(body)}</svg>')

    def text(self) -> str:
        """The same content as a list of steps, for a terminal or a log."""
        lines = [self.title, f"times: {self.slice} (the book's model, not a measurement)"]
        for name, tl in self.timelines.items():
            serialized = tl.compute_s + tl.comm_s
            lines.append(f"{name}: {'at least ' if tl.unknown_runs else ''}{_time(tl.total_s)} as its steps allow "
                         f"(compute {_time(tl.compute_s)}, communication {_time(tl.comm_s)}, "
                         f"{_time(serialized)} one after the other)")
            tiles = self.tiles(name, with_compute=True)
            lines += [f"  {_tile_text(self.analyses[name], t, self.compact)}" for t in tiles]
            if not tiles:
                lines.append("  no communication, no matmul")
        return "\n".join(lines + self.notes())

    def __str__(self) -> str:
        return self.text()

    def __rich__(self):  # how `assignments.display.console` prints it outside a notebook
        from rich.text import Text

        return Text(self.text())

    def _repr_html_(self) -> str:
        return f'<div class="kit-schedule-figure" style="max-width:100%;margin:4px 0">{self.svg()}</div>'

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        return {"text/html": self._repr_html_(), "text/plain": self.text()}


def draw_schedule(analyses: ProgramAnalysis | dict[str, ProgramAnalysis], chip="TPU v5e", *,
                  compact: bool = False, title: str | None = None) -> Schedule:
    """The schedule of one analysis, or of several ({name: analysis}) side by side, with
    times estimated on `chip` (a name in `assignments.costs.CHIPS`, or a `Slice`).
    Shown as a picture when it is a cell's value; `str()` gives the text form."""
    if isinstance(analyses, ProgramAnalysis):
        analyses = {"program": analyses}
    timelines = {name: timeline(a, chip) for name, a in analyses.items()}
    return Schedule(dict(analyses), timelines, compact, title or Schedule.title)


def show_schedule(fn, *args, baseline=None, chip="TPU v5e", compact: bool = False, title: str | None = None,
                  **kwargs) -> dict:
    """Compile `jax.jit(fn)(*args, **kwargs)` and draw what it communicates, step by step.

    `fn` may be one function or {name: function}; `baseline` (e.g. the plain `jax.jit`
    version) is drawn beside it under the name "plain jax.jit". `args` may be arrays or
    `jax.ShapeDtypeStruct`s carrying shardings: nothing runs, so the book's sizes cost only
    compile time. Times are estimated on `chip`. Returns {name: ProgramAnalysis}.
    """
    from .checks import ShownAnalyses, compile_programs
    from .display import console

    programs = dict(fn) if isinstance(fn, dict) else {getattr(fn, "__name__", "program"): fn}
    if baseline is not None:
        programs["plain jax.jit"] = baseline
    analyses = compile_programs(programs, args, kwargs, "show_schedule")
    console.print(draw_schedule(analyses, chip, compact=compact, title=title))
    return ShownAnalyses(analyses)
