"""The step model: a compiled program as the steps every device takes, and how long each takes.

Reading (`stages_from_text`, called by `assignments.hlo.analyze`): the compiled program is
walked in execution order (a compiled module is scheduled, so the text order within a
computation is the order it runs in). Each loop whose body communicates becomes a `Stage`
run once per iteration; the straight-line code before, between and after such loops becomes
stages of its own (a loop that only computes counts there as one matmul of all its
iterations; one whose trip count is unknown is a stage of its own, run an unknown number of
times). A loop that communicates inside another one is a stage of its own too, run as
often as both loops together run. Rank-1 updates (a multiply of two broadcasts) count as
matmuls in a loop's body and in straight-line code that runs no collective. A stage lists its collectives and matmuls (`Event`) and,
for each, which earlier ones it needs (data flow inside one run of the stage; the branches of
a conditional that communicates are read as if written in its place, so that their permutes
form the steps they would form outside it).

Timing (`timeline`): a stage's collectives are grouped into steps (a collective joins the
step before it when it needs nothing computed since that step began, as the two directions
of a bidirectional ring do), each step priced by the cost model (`assignments.costs.communication`: the permutes of
one step share their axis's links), each matmul at the chip's peak. Then every step and
matmul starts as soon as what it needs is done and its lane is free: one lane for the
links, one for the matrix units. Work that needs nothing from the step beside it overlaps;
work that waits for it does not. A loop's iterations run one after the other, and so do
stages. That is "overlapped or serialized as the program allows", under two simplifications
said wherever it is shown: the next iteration starts when the last one ends (no overlap
across iterations), and only matmuls take compute time, scaled so that they add up to the
program's compute estimate (which may be memory time).
"""
from __future__ import annotations

import dataclasses
import re

from .hlo import (_BRANCHES, _CALLS, _TRIP, Collective, Event, ProgramAnalysis, Stage, _Instruction,
                  _parse_module, matmul_work, outer_product_flops, sum_of_products,
                  summed_multiplies)

_INDEX = re.compile(r"\bindex=(\d+)")

MAX_EVENTS = 4000
"""A program with more collectives and matmuls than this (a long loop unrolled in Python)
keeps no stages: the drawing then shows each collective on its own."""


# ---------------------------------------------------------------------------------------
# Reading the stages from HLO text


def _summed(insts: list[_Instruction], by_name: dict) -> set[str]:
    """The multiplies whose products a sum of products among `insts` takes (`matmul_work`
    counts those, as the sum)."""
    return {m for i in insts if sum_of_products(i, by_name) for m in summed_multiplies(i, by_name)}


class _Reader:
    """What each computation of one module communicates and multiplies, memoized."""

    def __init__(self, computations: dict[str, list[_Instruction]], collective_index: dict[str, int]):
        self.computations = computations
        self.index = collective_index
        self._flops: dict[str, dict[str, float]] = {}
        self._carried: dict[str, tuple[int, ...]] = {}
        self._callees: dict[str, list[tuple[str, int]]] = {}
        self._unbounded: dict[str, bool] = {}
        self._outer: dict[str, dict[str, float]] = {}

    def callees(self, inst: _Instruction) -> list[tuple[str, int]]:
        """(computation, times run per run of `inst`) of everything `inst` calls."""
        if inst.name not in self._callees:
            self._callees[inst.name] = self._read_callees(inst)
        return self._callees[inst.name]

    def _read_callees(self, inst: _Instruction) -> list[tuple[str, int]]:
        if not any(k in inst.attrs for k in ("calls=", "to_apply=", "body=", "computation")):
            return []  # calls nothing (most instructions): skip the regular expressions
        out = []
        trip = _TRIP.search(inst.attrs) if inst.opcode == "while" else None
        for kind, callee in _CALLS.findall(inst.attrs):
            out.append((callee, int(trip.group(1)) if trip and kind == "body" else 1))
        for branch in _BRANCHES.findall(inst.attrs):
            out += [(c, 1) for c in re.findall(r"%?([\w.\-]+)", branch)]
        return [(c, n) for c, n in out if c in self.computations]

    def flops(self, inst: _Instruction, by_name: dict) -> dict[str, float]:
        """Matmul FLOPs by dtype of one instruction (`matmul_work`: a dot, or the same product
        written as a multiply and a sum), inside what it calls included (of a conditional, the
        branch that multiplies most: one branch runs)."""
        total: dict[str, float] = {}
        own = matmul_work(inst, by_name)
        if own is not None:
            total[own[0]] = own[1]
        callees = self.callees(inst)
        if inst.opcode == "while":
            for callee, times in callees:
                for dtype, f in self.outer_products(callee).items():
                    total[dtype] = total.get(dtype, 0.0) + f * times
        if inst.opcode == "conditional" and callees:
            callees = [max(callees, key=lambda c: sum(self.computation_flops(c[0]).values()))]
        for callee, times in callees:
            for dtype, f in self.computation_flops(callee).items():
                total[dtype] = total.get(dtype, 0.0) + f * times
        return total

    def computation_flops(self, comp: str) -> dict[str, float]:
        if comp not in self._flops:
            self._flops[comp] = {}  # a cycle (malformed text) counts nothing
            insts = self.computations[comp]
            by_name = {i.name: i for i in insts}
            total: dict[str, float] = {}
            for inst in insts:
                for dtype, f in self.flops(inst, by_name).items():
                    total[dtype] = total.get(dtype, 0.0) + f
            self._flops[comp] = total
        return self._flops[comp]

    def outer_products(self, comp: str) -> dict[str, float]:
        """FLOPs by dtype of the outer products (`outer_product_flops`: a multiply of two
        broadcasts) in a loop's body, inside what it calls included, its own loops' times their
        trip counts: a product made by rank-1 updates, one per run of the loop. Counted in loops,
        and in straight-line code only where it runs no collective (`block_stage`):
        unrolled, XLA:CPU fuses a ring step's rank-1 product (a dot whose contracted size is 1)
        into the next step's elementwise chain (`matmul_work`), but no fusion crosses a loop's
        runs. Not the multiplies a sum of products takes (`matmul_work` counts those)."""
        if comp not in self._outer:
            self._outer[comp] = {}  # a cycle (malformed text) counts nothing
            insts = self.computations[comp]
            self._outer[comp] = self._outer_in(insts, {i.name: i for i in insts}, fusions_only=False)
        return self._outer[comp]

    def _outer_in(self, insts: list[_Instruction], by_name: dict, fusions_only: bool,
                  summed: set[str] | None = None) -> dict[str, float]:
        """Outer-product FLOPs by dtype of `insts` and of what they call (only their fusions'
        bodies when `fusions_only`: a loop's outer products are its matmuls already, `flops`),
        but for the multiplies in `summed` (those a sum of products among `insts` takes)."""
        if summed is None:
            summed = _summed(insts, by_name)
        total: dict[str, float] = {}
        for inst in insts:
            if inst.name not in summed and (f := outer_product_flops(inst, by_name)) > 0:
                total[inst.shapes[0].dtype] = total.get(inst.shapes[0].dtype, 0.0) + f
            if fusions_only and inst.opcode != "fusion":
                continue
            for callee, times in self.callees(inst):
                for dtype, g in self.outer_products(callee).items():
                    total[dtype] = total.get(dtype, 0.0) + g * times
        return total

    def product_operands(self, inst: _Instruction) -> set[int] | None:
        """The operands of a fusion that its matmul work is made of: the fused computation's
        parameters its dots and sums of products are computed from. None (all of them) for
        any other instruction, or a fusion that makes no product. XLA may fuse a block's
        product with the running sum it is added to (`acc + jnp.sum(t[:, :, None] * w, 1)`
        after `acc` came by a permute): the product then needs only what it is made of, and
        runs beside that permute, as the same product written as a dot and an add does."""
        if inst.opcode != "fusion":
            return None
        callees = [c for c, _ in self.callees(inst) if c in self.computations]
        if len(callees) != 1:
            return None
        body = self.computations[callees[0]]
        by_name = {i.name: i for i in body}
        stack = [o for i in body if matmul_work(i, by_name) for o in i.operands]
        if not stack:
            return None
        reached, seen = set(), set()
        while stack:
            name = stack.pop()
            if name in seen or name not in by_name:
                continue
            seen.add(name)
            if by_name[name].parameter is not None:
                reached.add(by_name[name].parameter)
            stack += by_name[name].operands
        return reached

    def unbounded(self, inst: _Instruction) -> bool:
        """Does `inst` multiply in a loop whose trip count is unknown (itself one, or inside what
        it calls)?"""
        callees = self.callees(inst)
        if inst.opcode == "while" and _TRIP.search(inst.attrs) is None and any(
                any(self.computation_flops(c).values()) or any(self.outer_products(c).values()) for c, _ in callees):
            return True
        return any(self.computation_unbounded(c) for c, _ in callees)

    def computation_unbounded(self, comp: str) -> bool:
        if comp not in self._unbounded:
            self._unbounded[comp] = False  # a cycle (malformed text) adds nothing
            self._unbounded[comp] = any(self.unbounded(i) for i in self.computations[comp])
        return self._unbounded[comp]

    def collectives(self, inst: _Instruction) -> tuple[int, ...]:
        """The analysis's collectives that `inst` is, or runs inside what it calls."""
        own = () if inst.opcode.endswith("-done") or inst.name not in self.index else (self.index[inst.name],)
        return own + tuple(i for callee, _ in self.callees(inst) for i in self.carried(callee))

    def carried(self, comp: str) -> tuple[int, ...]:
        if comp not in self._carried:
            self._carried[comp] = ()
            self._carried[comp] = tuple(i for inst in self.computations[comp] for i in self.collectives(inst))
        return self._carried[comp]

    def stages(self, comp: str, runs: int | None, loop: str) -> list[Stage]:
        """The stages of one computation run `runs` times: its loops that communicate become
        stages of their own, the code around them stages of `loop` (a loop that only
        computes is one instruction of that code, its matmuls counted for all iterations,
        unless its trip count is unknown: then it is a stage of its own, run an unknown
        number of times, so that no rule counts its matmuls as done once)."""
        out: list[Stage] = []
        block: list[_Instruction] = []
        by_name = {i.name: i for i in self.computations[comp]}
        for inst in self.computations[comp]:
            body = next((c for k, c in _CALLS.findall(inst.attrs) if k == "body"), None)
            if inst.opcode == "while" and body in self.computations and (self.carried(body) or self.unbounded(inst)):
                out += self.block_stage(block, by_name, runs, loop)
                block = []
                trip = _TRIP.search(inst.attrs)
                inner = None if (runs is None or trip is None) else runs * int(trip.group(1))
                out += self.stages(body, inner, inst.name)
            elif inst.opcode == "call" and self.unbounded(inst):  # XLA:CPU wraps a small loop in a call
                out += self.block_stage(block, by_name, runs, loop)
                block = []
                for callee, _ in self.callees(inst):
                    out += self.stages(callee, runs, "")
            else:
                block.append(inst)
        return out + self.block_stage(block, by_name, runs, loop)

    def block_stage(self, block: list[_Instruction], by_name: dict, runs: int | None, loop: str) -> list[Stage]:
        """Straight-line code as one stage (none if it neither communicates nor multiplies). A
        loop's body also says what each value it carries is computed from (`Stage.carried`),
        and each event which carried values it reads (`Event.reads`)."""
        events: list[Event] = []
        needs: list[set[int]] = []          # every earlier event each event needs, transitively
        # Rank-1 updates are matmuls in a loop's body, and in straight-line code that runs no
        # collective; beside a collective an honest step's may be fused into the next (`outer_products`).
        outer = bool(loop) or not any(self.collectives(i) for i in block)
        reach = self._walk(block, by_name, set(), events, needs, carry=bool(loop), outer=outer)
        carried: tuple[tuple[int, ...], ...] = ()
        root = block[-1] if loop and block else None
        if root is not None:
            outputs = root.operands if root.opcode == "tuple" else [root.name]
            carried = tuple(tuple(sorted(d for d in reach.get(o, ()) if d >= 0)) for o in outputs)
        return [Stage(tuple(events), runs, loop, carried)] if events else []

    def _walk(self, insts: list[_Instruction], by_name: dict, given: set[int], events: list[Event],
              needs: list[set[int]], inside: tuple[str, ...] = (), carry: bool = False,
              outer: bool = False) -> dict[str, set[int]]:
        """Add the events of straight-line `insts` to `events` (and to `needs` what each needs),
        their parameters depending on the events `given`.

        A call or a conditional that communicates is walked into: its computations' events
        take its place, each computation's parameters standing for all its operands, so that
        the permutes inside a branch form the steps they would form outside it (stamping one
        `after` on them all would make one step of a whole ring). A loop inside one counts
        as one instruction: its collectives and matmuls all need what it needs. (`inside`: the
        computations being walked, so that a cycle (malformed text) is not walked into.)

        With `carry` (a loop's body), the value k the loop carries stands in `reach` as -(k + 1)
        (its parameter's tuple element k), so that what each event reads of the last run shows.
        Returns `reach`: each instruction's events (and carried values)."""
        reach: dict[str, set[int]] = {}     # instruction -> the events its value depends on
        summed = _summed(insts, by_name) if outer else set()
        for inst in insts:
            if len(events) > MAX_EVENTS:    # the stages are dropped anyway: stop early
                return reach
            if carry and inst.opcode == "parameter":
                deps = {-(k + 1) for k in range(max(len(inst.shapes), 1))}
            elif (carry and inst.opcode == "get-tuple-element" and inst.operands
                  and by_name.get(inst.operands[0]) is not None and by_name[inst.operands[0]].opcode == "parameter"
                  and (index := _INDEX.search(inst.attrs))):
                deps = {-(int(index.group(1)) + 1)}
            elif inst.opcode == "parameter":
                deps = set(given)
            else:
                deps = set().union(*(reach.get(o, set()) for o in inst.operands))
            first = len(events)
            callees = [c for c, _ in self.callees(inst) if c not in inside]
            if inst.opcode != "while" and any(self.carried(c) for c in callees):
                for callee in callees:      # (the branches' events one after the other)
                    body = self.computations[callee]
                    self._walk(body, {i.name: i for i in body}, deps, events, needs, inside + (callee,))
            else:
                def placed(deps: set[int]) -> tuple[set[int], tuple[int, ...], tuple[int, ...]]:
                    """(the events needed, the latest of them, the carried values read)."""
                    earlier = {d for d in deps if d >= 0}
                    after = tuple(sorted(d for d in earlier if not any(d in needs[e] for e in earlier)))
                    return earlier, after, tuple(sorted(-d - 1 for d in deps if d < 0))

                earlier, after, reads = placed(deps)
                new = [(Event(collective=i, after=after, reads=reads), earlier) for i in self.collectives(inst)]
                made_of = self.product_operands(inst)
                if made_of is not None:  # a product fused with what it is added to needs only its own operands
                    earlier, after, reads = placed(set().union(*(reach.get(o, set()) for k, o in enumerate(inst.operands)
                                                                 if k in made_of)))
                new += [(Event(flops=f, dtype=dtype, after=after, reads=reads), earlier)
                        for dtype, f in self.flops(inst, by_name).items() if f > 0]
                if outer:  # its rank-1 updates are matmuls too (`outer_products`)
                    new += [(Event(flops=f, dtype=dtype, after=after, reads=reads), earlier)
                            for dtype, f in self._outer_in([inst], by_name, True, summed).items() if f > 0]
                for event, needed in new:
                    events.append(event)
                    needs.append(needed)
            reach[inst.name] = deps | set(range(first, len(events)))
        return reach


def stages_from_text(text: str, collectives: tuple[Collective, ...]) -> tuple[Stage, ...]:
    """The program's stages in execution order (see the module's docstring); () when it has
    more than `MAX_EVENTS` events."""
    computations, entry = _parse_module(text)
    if entry is None:
        return ()
    reader = _Reader(computations, {c.name: i for i, c in enumerate(collectives)})
    stages = reader.stages(entry, 1, "")
    if sum(len(s.events) for s in stages) > MAX_EVENTS:
        return ()
    return tuple(stages)


def stages_of(analysis: ProgramAnalysis) -> tuple[Stage, ...]:
    """The analysis's stages; for one made without them (older JSON, or too many events),
    each collective as a stage of its own, run as often as it runs, with no matmuls."""
    if analysis.stages:
        return analysis.stages
    return tuple(Stage((Event(collective=i),), c.count, c.name) for i, c in enumerate(analysis.collectives))


# ---------------------------------------------------------------------------------------
# Timing the steps on a chip


@dataclasses.dataclass(frozen=True)
class Bar:
    """Work on one lane during one run of a stage."""

    lane: str
    """"network" (a step's collectives) or "compute" (matmuls)."""
    start_s: float
    """From the start of the stage's run."""
    seconds: float
    step: int = -1
    """Network bars: the step's index within the stage."""


@dataclasses.dataclass(frozen=True)
class TimedStage:
    """One stage on a chip: its steps and when each lane is busy in one run."""

    stage: Stage
    steps: tuple[tuple[int, ...], ...]
    """The collectives that run together in each step (indices into the analysis's)."""
    bars: tuple[Bar, ...]
    run_s: float
    """One run, from its start to the end of its last bar."""

    @property
    def runs(self) -> int | None:
        return self.stage.runs

    @property
    def total_s(self) -> float:
        """All its runs (an unknown trip count counts once)."""
        return self.run_s * (1 if self.stage.runs is None else self.stage.runs)

    def step_seconds(self, lane: str, step: int = -1) -> float:
        return sum(b.seconds for b in self.bars if b.lane == lane and (step < 0 or b.step == step))

    def _window(self, step: int) -> tuple[float, float]:
        """A step's share of a run: from its start (0 for the first) to the next step's."""
        starts = {b.step: b.start_s for b in self.bars if b.lane == "network"}
        return (0.0 if step == 0 else starts.get(step, 0.0)), starts.get(step + 1, self.run_s)

    def step_compute(self, step: int) -> float:
        """Matmul time within the step's share of a run."""
        lo, hi = self._window(step)
        return sum(max(0.0, min(hi, b.start_s + b.seconds) - max(lo, b.start_s)) for b in self.bars if b.lane == "compute")

    def step_overlaps(self, step: int) -> bool:
        """Whether matmuls run while the step's collectives do."""
        net = [b for b in self.bars if b.lane == "network" and b.step == step]
        return any(min(n.start_s + n.seconds, b.start_s + b.seconds) - max(n.start_s, b.start_s) > 1e-15
                   for n in net for b in self.bars if b.lane == "compute")


@dataclasses.dataclass(frozen=True)
class Timeline:
    """A program's stages, timed on one slice."""

    stages: tuple[TimedStage, ...]
    slice: str
    """The mesh-to-slice mapping (`assignments.costs.Slice.describe`)."""
    compute_s: float
    """The estimate's compute time (`assignments.costs.Estimate.compute_s`)."""
    placed_compute_s: float
    """Compute time on the timeline: 0 when the program has no matmul to place it on."""
    comm_s: float
    """The estimate's communication time, the whole program priced at once."""
    slice_short: str = ""
    """The same mapping in a few words: "TPU v5e 2x4 slice: X a line of 2, Y a line of 4"."""

    @property
    def total_s(self) -> float:
        return sum(s.total_s for s in self.stages)

    @property
    def unknown_runs(self) -> bool:
        return any(s.runs is None for s in self.stages)


def event_needs(stage: Stage) -> list[set[int]]:
    """Every earlier event each event needs, directly or not."""
    needs: list[set[int]] = []
    for i, e in enumerate(stage.events):
        direct = {a for a in e.after if 0 <= a < i}
        needs.append(direct.union(*(needs[a] for a in direct)))
    return needs


def group_steps(stage: Stage, needs: list[set[int]]) -> list[list[int]]:
    """Event indices of the stage's collectives, grouped into steps: a collective joins the
    step before it when it needs nothing computed since that step's first collective (as
    the two directions of a bidirectional ring), so that the step can start at once."""
    steps: list[list[int]] = []
    for i, e in enumerate(stage.events):
        if e.collective < 0:
            continue
        if steps and all(j < steps[-1][0] for j in needs[i]):
            steps[-1].append(i)
        else:
            steps.append([i])
    return steps


def _step_seconds(analysis: ProgramAnalysis, collectives: list[Collective], on) -> float:
    """One run of collectives that run together, priced together (shared links)."""
    from .costs import communication

    together = dataclasses.replace(analysis, collectives=tuple(dataclasses.replace(c, count=1) for c in collectives),
                                   stages=())
    return communication(together, on)[0]


def time_stage(analysis: ProgramAnalysis, stage: Stage, on, seconds_per_flop: dict[str, float]) -> TimedStage:
    """List-schedule one run of a stage: each step and matmul starts when what it needs is
    done and its lane is free, the one that can start first going first (see the module's
    docstring)."""
    needs = event_needs(stage)
    steps = [s for s in ([i for i in s if stage.events[i].collective < len(analysis.collectives)]
                         for s in group_steps(stage, needs)) if s]
    # A job: (lane, its events, step index); a step's collectives run as one job.
    jobs = [("network", s, k) for k, s in enumerate(steps)]
    jobs += [("compute", [i], -1) for i, e in enumerate(stage.events) if e.collective < 0]
    jobs.sort(key=lambda job: job[1][0])
    job_of = {i: j for j, job in enumerate(jobs) for i in job[1]}
    deps = [{job_of[a] for i in events for a in needs[i] if a in job_of} - {j} for j, (_, events, _) in enumerate(jobs)]
    done: dict[int, float] = {}
    free = {"network": 0.0, "compute": 0.0}
    bars: list[Bar] = []

    def earliest(j: int) -> float:
        return max([free[jobs[j][0]]] + [done[d] for d in deps[j]])

    while len(done) < len(jobs):  # of the jobs whose inputs are done, the one that can start first
        ready = [j for j in range(len(jobs)) if j not in done and deps[j] <= done.keys()]
        if not ready:             # (no cycle, even in forged JSON: drop what is not done)
            ready = [min(j for j in range(len(jobs)) if j not in done)]
            deps[ready[0]] &= done.keys()
        j = min(ready, key=lambda j: (earliest(j), j))
        lane, events, k = jobs[j]
        if lane == "network":
            seconds = _step_seconds(analysis, [analysis.collectives[stage.events[i].collective] for i in events], on)
        else:
            e = stage.events[events[0]]
            seconds = e.flops * seconds_per_flop.get(e.dtype, 0.0)
        start = earliest(j)
        done[j] = free[lane] = start + seconds
        if seconds > 0 or lane == "network":
            bars.append(Bar(lane, start, seconds, k))
    return TimedStage(stage, tuple(tuple(stage.events[i].collective for i in s) for s in steps),
                      tuple(sorted(bars, key=lambda b: (b.start_s, b.lane))),
                      max((b.start_s + b.seconds for b in bars), default=0.0))


def timeline(analysis: ProgramAnalysis, on="TPU v5e") -> Timeline:
    """Every stage of the program timed on a chip (its mesh laid on a slice as
    `assignments.costs.slice_for` lays it) or on a given `assignments.costs.Slice`."""
    from .costs import Slice, estimate, slice_for

    s = on if isinstance(on, Slice) else slice_for(on, analysis.mesh_shape, analysis.axis_names)
    est = estimate(analysis, s)
    stages = stages_of(analysis)
    matmul_s = sum(e.flops / s.chip.peak(e.dtype) * (st.runs or 1)
                   for st in stages for e in st.events if e.collective < 0)
    scale = est.compute_s / matmul_s if matmul_s > 0 else 0.0  # matmuls carry the whole compute estimate
    per_flop = {e.dtype: scale / s.chip.peak(e.dtype) for st in stages for e in st.events if e.collective < 0}
    timed = tuple(time_stage(analysis, st, s, per_flop) for st in stages)
    short = f"{s.name} slice: " + ", ".join(f"{a.name} a {a.topology} of {a.size}" for a in s.axes)
    return Timeline(timed, s.describe(), est.compute_s, est.compute_s if matmul_s > 0 else 0.0, est.comm_s, short)
