"""One analysis of compiled programs, shared by the visible checks and the graders.

`analyze(compiled, mesh)` reads the compiled (SPMD-partitioned, optimized) HLO text once
and returns a `ProgramAnalysis`: every collective with its kind, the mesh axes it runs
over, its per-device shape and bytes, and how many times it runs (loop trip counts read
from the compiled program), plus the largest values the program computes (each with the
arguments it is computed from, so that routing bookkeeping is told from activations) and its
temporary memory. Everything else in the kit asserts on this table, never on raw text.
"""
from __future__ import annotations

import dataclasses
import functools
import re
import weakref
from collections import defaultdict

import numpy as np

from .replica_groups import parse_replica_groups, parse_source_target_pairs

COLLECTIVE_KINDS = (
    "all-gather", "all-reduce", "reduce-scatter", "all-to-all",
    "ragged-all-to-all", "collective-permute", "collective-broadcast",
)

_DTYPE_BITS = {
    "pred": 8, "s1": 1, "u1": 1, "s2": 2, "u2": 2, "s4": 4, "u4": 4, "f4e2m1fn": 4,
    "s8": 8, "u8": 8, "f8e5m2": 8, "f8e4m3": 8, "f8e4m3fn": 8, "f8e4m3b11fnuz": 8, "f8e3m4": 8,
    "f8e5m2fnuz": 8, "f8e4m3fnuz": 8, "f8e8m0fnu": 8,
    "bf16": 16, "f16": 16, "s16": 16, "u16": 16,
    "f32": 32, "s32": 32, "u32": 32,
    "f64": 64, "s64": 64, "u64": 64, "c64": 64, "c128": 128,
}
"""Bits per element of XLA's array types. A sub-byte type packs its elements: 16 u2 digits
carry one float32's bits, and count as its 4 bytes."""
_PRIMITIVE = re.compile(r"^(?:[subfc]\d+|f\d+e\d+m\d+[a-z0-9]*)$")
"""What an array type looks like: one missing from `_DTYPE_BITS` (a type newer than this
table) counts as 32 bits an element, never as nothing."""


def _bits(dtype: str) -> int:
    return _DTYPE_BITS.get(dtype, 32)


@dataclasses.dataclass(frozen=True)
class ArrayShape:
    """One array in an HLO shape, e.g. ``f32[8,4]``."""

    dtype: str
    """HLO element type (``f32``, ``bf16``, ``s32``, ...)."""
    dims: tuple[int, ...]
    """Dimensions (for dynamic dimensions, their bound)."""

    @property
    def elements(self) -> int:
        return int(np.prod(self.dims, dtype=np.int64)) if self.dims else 1

    @property
    def bytes(self) -> int:
        return -(-self.elements * _bits(self.dtype) // 8)

    @property
    def size(self) -> int:
        """How large the array is, in float32 values: its elements, or its bytes / 4 when its
        elements are wider (a c64 or f64 array packs two float32 values into each), so that a
        memory rule stated in elements cannot be met by packing floats into a wider type."""
        return max(self.elements, -(-self.bytes // 4))

    def size_text(self) -> str:
        """`size` as messages state it: "(6,144 elements)", or for a wide type "(6,144
        elements of 8 bytes: as large as 12,288 float32 values)"."""
        if self.size == self.elements:
            return f"({self.elements:,} elements)"
        return (f"({self.elements:,} elements of {_bits(self.dtype) // 8} bytes: as large as "
                f"{self.size:,} float32 values)")

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.dims))}]"


@dataclasses.dataclass(frozen=True)
class Collective:
    """One collective operation of the compiled program, as one device sees it."""

    kind: str
    """``all-reduce``, ``all-gather``, ``collective-permute``, ... (async -start forms folded in)."""
    axes: tuple[str, ...]
    """Mesh axes the collective runs over (empty when every group is a single device)."""
    operands: tuple[ArrayShape, ...]
    """What each device sends in: several for a combined (tuple) collective."""
    results: tuple[ArrayShape, ...]
    """What each device gets back."""
    count: int | None
    """How many times it runs per program execution (loop trip counts multiplied in);
    None when a loop around it has no trip count known at compile time."""
    group_size: int
    """Devices per replica group (the ring length for a collective-permute's axis)."""
    shifts: tuple[int, ...] = ()
    """collective-permute only: the distinct ring offsets (target - source) along its axis."""
    name: str = ""
    """The instruction's name in the HLO text, to find it there."""
    accelerator_kind: str = ""
    """What a GPU or TPU would run in its place, when the CPU compiler wrote it another way
    (e.g. ``reduce-scatter`` for an all-reduce whose result only feeds a dynamic-slice of one
    device's share, XLA:CPU's lowering of a reduce-scatter); empty when the same."""
    pairs: tuple[tuple[int, int], ...] = ()
    """collective-permute only: every (source, target) device pair that moves data, as the
    compiled program numbers devices (row-major positions in the mesh)."""
    groups: tuple[tuple[int, ...], ...] = ()
    """The other kinds: the groups of devices that act together (replica groups), numbered
    as `pairs` are."""
    computation: str = ""
    """The HLO computation it is in (the entry, a loop body, a branch of a conditional): two
    collectives in different branches of one conditional never run in the same pass."""
    matmul_needs: tuple[float, ...] = ()
    """Per operand: the matmul work (FLOPs per device, each matmul once, one run) of the
    instructions of its computation that the operand is computed from (`needed_matmul_work`):
    a piece of a split reduction multiplied on its own needs its own product only."""
    copies: bool = False
    """all-to-all only: every block it sends is a copy of one computed value (`_copies_one_value`),
    so that each device gets every device's value: an all-gather spelled as an all-to-all."""
    sources: tuple[int, ...] | None = None
    """The program's arguments what it sends is computed from (as `Value.sources`), so that a
    message can say what moved (a count computed from the routing, or the tokens in another
    type); None when not known."""

    @property
    def priced_kind(self) -> str:
        """The collective an accelerator runs: `accelerator_kind` if set, else `kind`."""
        return self.accelerator_kind or self.kind

    @property
    def elements(self) -> int:
        """Elements each device sends in per execution."""
        return sum(o.elements for o in self.operands)

    @property
    def bytes(self) -> int:
        """Bytes each device sends in per execution."""
        return sum(o.bytes for o in self.operands)

    @property
    def size(self) -> int:
        """What each device sends in per execution, in float32 values (`ArrayShape.size`): the
        measure of the rules that state a collective's size in elements."""
        return sum(o.size for o in self.operands)

    @property
    def directions(self) -> tuple[int, ...]:
        """collective-permute only: the signed ring steps its pairs take along its axis,
        +k for k places forward (towards higher indices, wrapping), -k for backward;
        on a 2-device ring the one neighbour is +1."""
        n = max(self.group_size, 1)
        return tuple(sorted({s if s <= n // 2 else s - n for s in self.shifts}))

    @property
    def ring_bytes(self) -> float:
        """Bytes each device puts on its links per execution with ring algorithms:
        (n-1)/n of the gathered result for an all-gather, of the operand for a
        reduce-scatter or all-to-all, twice that for an all-reduce, the operand for a permute."""
        n = max(self.group_size, 1)
        if self.kind == "collective-permute":
            return float(self.bytes)
        volume = sum(r.bytes for r in self.results) if self.kind == "all-gather" else self.bytes
        share = (n - 1) / n * volume
        return 2 * share if self.kind == "all-reduce" else share

    @property
    def pieces(self) -> int:
        """Number of operands: a combined collective of 3 arrays counts as 3 pieces."""
        return len(self.operands)

    @property
    def shape(self) -> str:
        return ", ".join(map(str, self.operands))


def bytes_sent(collectives, ring: bool = False):
    """Bytes each device sends in `collectives` over a whole execution, each run counted
    (`Collective.ring_bytes` with `ring`); None if a run count is unknown."""
    if any(c.count is None for c in collectives):
        return None
    return sum((c.ring_bytes if ring else c.bytes) * c.count for c in collectives)


@dataclasses.dataclass(frozen=True)
class Value:
    """A value the program computes (an instruction result outside fusions)."""

    name: str
    """The instruction's name in the HLO text, to find it there (XLA's, never the student's:
    messages describe a value by `describe`, not by this)."""
    shape: ArrayShape
    opcode: str
    sources: tuple[int, ...] | None = None
    """The program's arguments it is computed from (their positions in the call, 0 first),
    through tuples, loops, calls, fusions and conditionals (`_Sources`); empty for a value
    computed from none (a constant, an iota); None when not known (a value built by hand)."""
    bookkeeping: bool = False
    """Computed from no floating-point argument: from the integer arguments alone (problem2's
    routing B: ids, counts, ranks, one-hot masks, in any type) or from none. PROBLEMS.md: the
    memory rules count activations, values computed from A or W, and never bookkeeping."""

    def describe(self, names: tuple[str, ...] = ()) -> str:
        """What the value is, as a message says it: its shape, its size, the arguments it is
        computed from (by `names`, the program's arguments in order; without them, by position:
        "argument 2") and, where the program says, how it came about: "f32[4,37,8] (1,184
        elements, from A and B, carried through a loop)"."""
        details = [self.shape.size_text()[1:-1]]
        if self.sources:
            details.append("from " + _and([names[i] if i < len(names) else f"argument {i + 1}"
                                           for i in self.sources]))
        if self.opcode in _ROLES:
            details.append(_ROLES[self.opcode])
        return f"{self.shape} ({', '.join(details)})"


_ROLES = {"while": "carried through a loop", "all-to-all": "received by an all_to_all",
          "all-gather": "gathered by an all_gather", "conditional": "returned by a jax.lax.cond or switch"}
"""How a value came about, for the few instructions whose result says more than its shape."""


def _and(words: list[str]) -> str:
    """"W", "W and A", "W, A and B"."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


@dataclasses.dataclass(frozen=True)
class Event:
    """One collective or one matmul of a `Stage`, in program order."""

    collective: int = -1
    """Index into `ProgramAnalysis.collectives`; -1 for a matmul."""
    flops: float = 0.0
    """A matmul's FLOPs per device (0 for a collective)."""
    dtype: str = ""
    """A matmul's type as `matmul_type` writes it (``f32``, ``bf16``, ``f32/highest``, ...)."""
    after: tuple[int, ...] = ()
    """Earlier events of the same stage (their indices) whose results it needs; the events
    those need are left out (they are needed through them)."""
    reads: tuple[int, ...] = ()
    """In a loop's stage: the values the loop carries (their indices in its tuple) that it
    needs, directly or not: what the last run left there (`Stage.carried`)."""


@dataclasses.dataclass(frozen=True)
class Stage:
    """A stretch of the program that runs `runs` times in a row: the body of a loop, or
    straight-line code between loops (run once, or once per run of an enclosing loop)."""

    events: tuple[Event, ...]
    """Its collectives and matmuls, in program order."""
    runs: int | None = 1
    """Times it runs per execution (loop trip counts multiplied in); None when a loop's trip
    count is not known when compiling."""
    loop: str = ""
    """The loop's instruction in the HLO text; empty for straight-line code."""
    carried: tuple[tuple[int, ...], ...] = ()
    """A loop's stage: for each value the loop carries, every event of one run it is computed
    from (so the next run's events that read it need them); empty when not read."""

    @classmethod
    def from_json(cls, data: dict) -> "Stage":
        events = tuple(Event(int(e.get("collective", -1)), float(e.get("flops", 0.0)), str(e.get("dtype", "")),
                             tuple(int(a) for a in e.get("after", ())), tuple(int(k) for k in e.get("reads", ())))
                       for e in data["events"])
        runs = data.get("runs", 1)
        if runs is not None and int(runs) < 0:
            raise ValueError(f"a stage cannot run {runs} times")
        return cls(events, None if runs is None else int(runs), str(data.get("loop", "")),
                   tuple(tuple(int(e) for e in c) for c in data.get("carried", ())))


@dataclasses.dataclass(frozen=True, repr=False)
class ProgramAnalysis:
    """What a compiled program communicates and how much memory it uses, per device."""

    collectives: tuple[Collective, ...]
    """Every collective, in program order."""
    largest_values: tuple[Value, ...]
    """The largest computed values, parameters excluded, 10 in all, as the memory rules rank
    them: the activations first, then bookkeeping (`Value.bookkeeping`), each largest first by
    `ArrayShape.size`."""
    temp_bytes: int | None
    """Temporary memory XLA allocates per device (None if the backend does not say)."""
    num_devices: int
    """Devices the program runs on."""
    flops: float | None = None
    """FLOPs per device, from XLA's cost analysis (None if the backend does not say)."""
    bytes_accessed: float | None = None
    """Memory traffic per device in bytes, from XLA's cost analysis (of the CPU program)."""
    argument_bytes: int | None = None
    """Bytes of the program's inputs per device."""
    output_bytes: int | None = None
    """Bytes of the program's outputs per device."""
    dot_flops: tuple[tuple[str, float], ...] | None = None
    """Matmul FLOPs per device by operand type, ((type, FLOPs), ...), read from the program's
    dot instructions (2 x output elements x contracted size, loop trip counts multiplied in);
    the type is the dtype with the precision the dot asks for (`matmul_type`: ``f32``,
    ``f32/highest``, ...)."""
    vector_flops: float | None = None
    """Multiplies and reduced elements per device outside dots (elements of every `multiply`'s
    result and of every `reduce`'s input, loop trip counts multiplied in): a product written
    without a dot (a multiply and a sum, or a loop of multiply-adds) shows here, and so does a
    small dot that XLA rewrites that way."""
    largest_matmul: float | None = None
    """The most matmul work one dot, convolution, sum of a product (`sum_of_products`) or outer
    product (`outer_product_flops`) does in one run, in FLOPs per device: a collective matmul
    multiplies one block per ring step, never the gathered operand or the whole product."""
    mesh_shape: tuple[int, ...] = ()
    """The mesh's shape (empty when not known)."""
    axis_names: tuple[str, ...] = ()
    """The mesh's axis names, in the order of `mesh_shape`."""
    stages: tuple[Stage, ...] = ()
    """The program in execution order, loop by loop, with what each stretch communicates and
    computes (`assignments.steps`); empty when not read (an analysis made before it was)."""

    def __repr__(self) -> str:
        total = self.total_bytes
        moved = "an unknown number of" if total is None else f"{total:,}"
        return (f"<ProgramAnalysis: {len(self.collectives)} collective(s), {moved} bytes sent "
                f"per device, on {self.num_devices} devices>")

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "ProgramAnalysis":
        def shapes(items):
            return tuple(ArrayShape(s["dtype"], tuple(s["dims"])) for s in items)

        return cls(
            collectives=tuple(
                Collective(**{**c, "axes": tuple(c["axes"]), "operands": shapes(c["operands"]),
                              "results": shapes(c["results"]), "shifts": tuple(c["shifts"]),
                              "pairs": tuple((int(s), int(t)) for s, t in c.get("pairs", ())),
                              "groups": tuple(tuple(int(d) for d in g) for g in c.get("groups", ())),
                              "matmul_needs": tuple(float(f) for f in c.get("matmul_needs", ())),
                              "sources": None if c.get("sources") is None else tuple(int(i) for i in c["sources"])})
                for c in data["collectives"]),
            largest_values=tuple(Value(v["name"], ArrayShape(v["shape"]["dtype"], tuple(v["shape"]["dims"])),
                                       v["opcode"],
                                       None if v.get("sources") is None else tuple(int(i) for i in v["sources"]),
                                       bool(v.get("bookkeeping", False)))
                                 for v in data["largest_values"]),
            temp_bytes=data["temp_bytes"], num_devices=data["num_devices"],
            flops=data.get("flops"), bytes_accessed=data.get("bytes_accessed"),
            argument_bytes=data.get("argument_bytes"), output_bytes=data.get("output_bytes"),
            dot_flops=(None if data.get("dot_flops") is None
                       else tuple((str(d), float(f)) for d, f in data["dot_flops"])),
            vector_flops=None if data.get("vector_flops") is None else float(data["vector_flops"]),
            largest_matmul=None if data.get("largest_matmul") is None else float(data["largest_matmul"]),
            mesh_shape=tuple(data.get("mesh_shape", ())), axis_names=tuple(data.get("axis_names", ())),
            stages=tuple(Stage.from_json(st) for st in data.get("stages", ())),
        )

    def of_kind(self, *kinds: str) -> list[Collective]:
        return [c for c in self.collectives if c.kind in kinds]

    @property
    def total_bytes(self) -> int | None:
        """Bytes each device sends in over a whole execution (None if a count is unknown)."""
        return bytes_sent(self.collectives)

    @property
    def total_ring_bytes(self) -> float | None:
        """`Collective.ring_bytes` summed over a whole execution (None if a count is unknown)."""
        return bytes_sent(self.collectives, ring=True)

    def values_at_least(self, elements: int) -> list[Value]:
        """The activations as large as `elements` float32 values or larger (`ArrayShape.size`),
        largest first: what the memory rules count. Bookkeeping (`Value.bookkeeping`: values
        computed from the routing alone, or from no argument) never counts (PROBLEMS.md)."""
        return [v for v in self.largest_values if v.shape.size >= elements and not v.bookkeeping]


# ---------------------------------------------------------------------------------------
# Reading HLO text


@dataclasses.dataclass
class _Instruction:
    name: str
    shapes: tuple[ArrayShape, ...]
    opcode: str
    operands: list[str]
    inline_shapes: tuple[ArrayShape, ...]
    attrs: str
    parameter: int | None = None
    """A parameter's number (``parameter(2)``: 2); None for any other instruction."""
    parts: tuple[int, ...] = ()
    """A tuple-shaped result: how many arrays (of `shapes`) each of its elements holds, so that
    element i of a nested tuple is found among the flattened `shapes`; empty for an array."""
    root: bool = False
    """Is it its computation's ROOT (what the computation returns)?"""


_SHAPE = re.compile(r"\b([a-z]+\d*(?:e\d+m\d+[a-z0-9]*)?)\[([^\]]*)\]")
_HEADER = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s*\(.*\)\s*->\s*.*\{\s*$")
_CALLS = re.compile(
    r"\b(calls|to_apply|body|condition|true_computation|false_computation)=%?([\w.\-]+)"
)
_BRANCHES = re.compile(r"branch_computations=\{([^}]*)\}")
_TRIP = re.compile(r'"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"?(\d+)')


@functools.lru_cache(maxsize=8192)  # a program repeats its few shapes in every instruction
def _shapes(text: str) -> tuple[ArrayShape, ...]:
    out = []
    for dtype, dims in _SHAPE.findall(text):
        if dtype not in _DTYPE_BITS and not _PRIMITIVE.match(dtype):
            continue  # not an array type: e.g. mesh['X'=2] in a replica group's text
        sizes = tuple(int(d.lstrip("<=")) for d in dims.split(",") if d.strip())
        out.append(ArrayShape(dtype, sizes))
    return tuple(out)


def _matching(text: str, start: int, open_ch: str, close_ch: str) -> int:
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_ch:
            depth += 1
        elif text[i] == close_ch:
            depth -= 1
            if depth == 0:
                return i
    return len(text) - 1


_FREE_TEXT = re.compile(r"\b(metadata|frontend_attributes)=\{")


def _without_free_text(attrs: str) -> str:
    """`attrs` without the blocks whose text the program's author writes: `metadata` (op_name
    holds `jax.named_scope` names and pytree keys) and `frontend_attributes` (user metadata).
    A scope named "source_target_pairs={}" or "calls=%body" must not read as an attribute.
    The closing brace is found outside quoted strings, whose escapes are skipped."""
    out, at = [], 0
    while m := _FREE_TEXT.search(attrs, at):
        out.append(attrs[at:m.start()])
        depth, at = 0, len(attrs)
        for token in _BRACE_OR_STRING.finditer(attrs, m.end() - 1):
            if token.group() == "{":
                depth += 1
            elif token.group() == "}":
                depth -= 1
                if depth == 0:
                    at = token.end()
                    break
    out.append(attrs[at:])
    return "".join(out)


_BRACE_OR_STRING = re.compile(r'[{}]|"(?:[^"\\]|\\.|\\\Z)*(?:"|\Z)', re.S)
"""A brace, or a quoted string (escapes skipped; unterminated, it runs to the end): what
`_without_free_text` steps through, a token at a time instead of a character at a time."""


def _parse_instruction(line: str) -> _Instruction | None:
    m = re.match(r"^\s*(ROOT\s+)?%?([\w.\-]+)\s*=\s*", line)
    if not m:
        return None
    rest = line[m.end():]
    if rest.startswith("("):
        end = _matching(rest, 0, "(", ")")
        shape_text, rest = rest[: end + 1], rest[end + 1:].lstrip()
    else:
        shape_text, _, rest = rest.partition(" ")
    op = re.match(r"([a-z][\w\-]*)\(", rest)
    if not op:
        return None
    close = _matching(rest, op.end() - 1, "(", ")")
    operand_text = rest[op.end(): close]
    return _Instruction(
        name=m.group(2),
        shapes=_shapes(shape_text),
        opcode=op.group(1),
        operands=re.findall(r"%([\w.\-]+)", operand_text),
        inline_shapes=_shapes(operand_text),
        attrs=_without_free_text(rest[close + 1:]),
        parameter=int(operand_text) if op.group(1) == "parameter" and operand_text.strip().isdigit() else None,
        parts=_tuple_parts(shape_text) if shape_text.startswith("(") else (),
        root=m.group(1) is not None,
    )


@functools.lru_cache(maxsize=1024)  # a program repeats its loops' tuple shapes
def _tuple_parts(shape_text: str) -> tuple[int, ...]:
    """How many arrays each top-level element of a tuple shape holds: "(s32[], (f32[2], f32[3]))"
    gives (1, 2)."""
    parts, depth, start = [], 0, 1
    for i, ch in enumerate(shape_text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if (ch == "," and depth == 1) or (ch == ")" and depth == 0):
            if shape_text[start:i].strip():
                parts.append(len(_shapes(shape_text[start:i])))
            start = i + 1
    return tuple(parts)


@functools.lru_cache(maxsize=2)  # one analysis reads the same text several times; nobody changes it
def _parse_module(text: str):
    """HLO text -> ({computation: [instructions]}, entry name). Cached: treat as read-only."""
    computations: dict[str, list[_Instruction]] = {}
    entry, current = None, None
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header and "=" not in line.split("(")[0]:
            current = header.group(2)
            computations[current] = []
            if header.group(1):
                entry = current
            continue
        if line.strip() == "}":
            current = None
            continue
        if current is not None:
            inst = _parse_instruction(line)
            if inst:
                computations[current].append(inst)
    if entry is None and computations:
        entry = list(computations)[-1]
    return computations, entry


def _multipliers(computations, entry) -> tuple[dict[str, int | None], set[str]]:
    """How many times each computation runs per execution, and which are fusion bodies."""
    edges: dict[str, list[tuple[str, int | None]]] = defaultdict(list)
    fused: set[str] = set()
    for comp, insts in computations.items():
        for inst in insts:
            trip = None
            if inst.opcode == "while":
                t = _TRIP.search(inst.attrs)
                trip = int(t.group(1)) if t else None
            for kind, callee in _CALLS.findall(inst.attrs):
                if inst.opcode == "fusion" and kind == "calls":
                    fused.add(callee)
                factor = trip if kind in ("body", "condition") else 1
                if kind == "condition" and trip is not None:
                    factor = trip + 1
                if kind in ("true_computation", "false_computation"):
                    factor = None  # a conditional runs one branch, chosen by the data: counted by running
                edges[comp].append((callee, factor))
            for branch in _BRANCHES.findall(inst.attrs):
                callees = re.findall(r"%?([\w.\-]+)", branch)
                for callee in callees:
                    edges[comp].append((callee, 1 if len(callees) == 1 else None))
    mult: dict[str, int | None] = {}

    def visit(comp: str, m: int | None):
        # A computation called from several places runs the sum of their counts.
        prev = mult.get(comp, 0)
        mult[comp] = None if (prev is None or m is None) else prev + m
        for callee, factor in edges.get(comp, ()):
            visit(callee, None if (m is None or factor is None) else m * factor)

    if entry:
        visit(entry, 1)
    return mult, fused


def axes_of_groups(groups, mesh_shape, axis_names) -> tuple[str, ...]:
    """The mesh axes along which some group's devices (numbered row-major in the mesh) differ."""
    varying = set()
    for group in groups:
        coords = np.array([np.unravel_index(d, mesh_shape) for d in group])
        for i, name in enumerate(axis_names):
            if len(set(coords[:, i])) > 1:
                varying.add(i)
    return tuple(axis_names[i] for i in sorted(varying))


_GROUP_MODE_KINDS = ("all-reduce", "all-gather", "reduce-scatter")
"""The collectives whose replica groups XLA reads by mode (use_global_device_ids, channel_id)."""


def collectives_from_text(text: str, mesh_shape, axis_names,
                          arguments: tuple[int, ...] | None = None) -> list[Collective]:
    """Every collective in compiled HLO text, attributed to the given mesh's axes. `arguments`:
    as `values_from_text`'s, to say what each collective's operands are computed from."""
    computations, entry = _parse_module(text)
    flow = _data_flow(text)
    mult, _ = _multipliers(computations, entry)
    num_devices = int(np.prod(mesh_shape))
    names = {comp: {i.name: i for i in insts} for comp, insts in computations.items()}
    found = []
    for comp, insts in computations.items():
        by_name = names[comp]
        for inst in insts:
            kind = inst.opcode.removesuffix("-start")
            if kind not in COLLECTIVE_KINDS or inst.opcode.endswith("-done"):
                continue
            if inst.inline_shapes:
                operands = inst.inline_shapes
            else:
                operands = tuple(s for o in inst.operands if o in by_name for s in by_name[o].shapes)
            results = inst.shapes
            if inst.opcode.endswith("-start") and len(results) >= 2 * len(operands):
                results = results[len(operands):]  # async: (operands..., results...)
            shifts: tuple[int, ...] = ()
            groups: list[list[int]] = []
            pairs = parse_source_target_pairs(inst.attrs)
            if pairs is not None:
                pairs = [(s, t) for s, t in pairs if s != t]
                axes = axes_of_groups([[s, t] for s, t in pairs], mesh_shape, axis_names)
                group_size = int(np.prod([mesh_shape[axis_names.index(a)] for a in axes])) if axes else 1
                if len(axes) == 1:
                    i = axis_names.index(axes[0])
                    n = mesh_shape[i]
                    shifts = tuple(sorted({
                        int(np.unravel_index(t, mesh_shape)[i] - np.unravel_index(s, mesh_shape)[i]) % n
                        for s, t in pairs
                    }))
            else:
                groups = parse_replica_groups(inst.attrs)
                if not groups or (kind in _GROUP_MODE_KINDS and "use_global_device_ids=true" not in inst.attrs):
                    # Absent or {}: all devices in one group. And the groups hold device ids only
                    # with use_global_device_ids=true (JAX's form); otherwise they are replica
                    # ids (with one replica, {{0}} can mean every device): read as all devices.
                    groups = [list(range(num_devices))]
                axes = axes_of_groups(groups, mesh_shape, axis_names)
                # The largest group: groups may differ in size (`psum(axis_index_groups=[[0], [1, ..]])`),
                # and one device alone in the first says nothing of the others.
                group_size = max(len(g) for g in groups)
            if group_size <= 1:
                continue  # every device alone in its group: nothing moves (e.g. psum over a size-1 axis)
            accelerator_kind = ""
            if kind == "all-reduce" and _feeds_only_a_share(inst, insts, computations, group_size):
                accelerator_kind = "reduce-scatter"
            found.append(Collective(
                kind=kind, axes=axes, operands=operands, results=results,
                count=mult.get(comp, 1), group_size=group_size, shifts=shifts, name=inst.name,
                accelerator_kind=accelerator_kind, pairs=tuple(pairs or ()),
                groups=tuple(tuple(g) for g in groups), computation=comp,
                matmul_needs=tuple(needed_matmul_work(o, comp, names) for o in inst.operands),
                copies=kind == "all-to-all" and _copies_one_value(inst, by_name),
                sources=_sent_sources(flow, comp, inst, by_name, arguments),
            ))
    return found


def _sent_sources(flow, comp: str, inst: _Instruction, by_name: dict, arguments) -> tuple[int, ...] | None:
    """The arguments a collective's operands are computed from (None when not known)."""
    masks = [flow.values(comp, by_name[o]) if o in by_name else None for o in inst.operands]
    if not masks or any(m is None for m in masks):
        return None
    return _positions(_Sources._union(a for m in masks for a in m), arguments)


def _positions(mask: int, arguments: tuple[int, ...] | None) -> tuple[int, ...]:
    """The call's positions of the arguments the entry parameters in `mask` hold."""
    return tuple(sorted({arguments[p] if arguments is not None and p < len(arguments) else p
                         for p in range(mask.bit_length()) if mask >> p & 1}))


_CONSTANT_OPS = frozenset({"constant", "iota"})
_KEEPS_A_CONSTANT = frozenset({"broadcast", "reshape", "convert", "copy", "bitcast", "transpose"})


def _followed_through(name: str, by_name: dict, ops: frozenset) -> _Instruction | None:
    """The instruction that gives the value `name`, followed back through single-operand `ops`."""
    inst = by_name.get(name)
    while inst is not None and inst.opcode in ops and len(inst.operands) == 1:
        inst = by_name.get(inst.operands[0])
    return inst


def _constant(name: str, by_name: dict) -> bool:
    """Is the value a constant (or a reshaped, broadcast or cast one)?"""
    inst = _followed_through(name, by_name, _KEEPS_A_CONSTANT)
    return inst is not None and inst.opcode in _CONSTANT_OPS


_MOVES_NOTHING = frozenset({"copy", "bitcast", "reshape", "convert"})


def _copies_one_value(inst: _Instruction, by_name: dict) -> bool:
    """Is every block of an all-to-all a copy of one computed value: its operands (XLA:CPU
    passes one per device) all the same value, or its one operand a broadcast along the
    dimension it splits (reshapes, copies and casts followed through)?"""
    if not inst.operands or any(_constant(o, by_name) for o in inst.operands):
        return False
    sources = [_followed_through(o, by_name, _MOVES_NOTHING) for o in inst.operands]
    if len(sources) > 1 or sources[0] is None:
        return None not in sources and len({s.name for s in sources}) == 1
    split = re.search(r"\bdimensions=\{(\d+)\}", inst.attrs)
    kept = re.search(r"\bdimensions=\{([\d,]*)\}", sources[0].attrs)
    return (sources[0].opcode == "broadcast" and split is not None and kept is not None
            and split.group(1) not in kept.group(1).split(","))


def needed_matmul_work(operand: str, computation: str, names: dict[str, dict]) -> float:
    """The matmul work, in FLOPs per device in one run, of every instruction of `computation`
    that `operand` is computed from (itself included, each once; inside fusions too, and inside
    the loops, calls and conditionals whose results it reads, a loop's body times its trip
    count, so that a whole product made in a loop of its own counts whole): dots and
    convolutions (`dot_flops`), sums of a product (`sum_of_products`), and the multiplies of two
    computed values that no such sum takes (2 x their elements: XLA writes a dot whose
    contracted size is 1 as a multiply). `names`: each computation's instructions by name."""
    runs = {computation: 1}                 # times each computation reached runs per run of `computation`
    reached, stack = set(), [(computation, operand)]
    while stack:
        comp, name = stack.pop()
        inst = names.get(comp, {}).get(name)
        if (comp, name) in reached or inst is None:
            continue
        reached.add((comp, name))
        stack += [(comp, o) for o in inst.operands]
        for callee, times in _computes_in(inst):
            if callee in names and callee not in runs:  # everything the callee computes
                runs[callee] = runs[comp] * times
                stack += [(callee, n) for n, i in names[callee].items() if i.opcode != "parameter"]
    products, summed, total = [], set(), 0.0
    for comp, name in reached:
        inst, by_name = names[comp][name], names[comp]
        dot = dot_flops(inst, by_name)
        if dot is not None:
            total += dot[1] * runs[comp]
        elif inst.opcode == "reduce" and (product := sum_of_products(inst, by_name)) is not None:
            total += product[1] * runs[comp]
            summed |= {(comp, m) for m in summed_multiplies(inst, by_name)}
        elif inst.opcode == "multiply" and inst.shapes and not any(_constant(o, by_name) for o in inst.operands):
            products.append((comp, name, 2.0 * inst.shapes[0].elements * runs[comp]))
    return total + sum(work for comp, name, work in products if (comp, name) not in summed)


def _computes_in(inst: _Instruction) -> list[tuple[str, int]]:
    """(computation, times it runs per run of `inst`) of the computations whose work makes
    `inst`'s result: a fusion's, a call's, a conditional's branches, a loop's body (times its
    trip count; once when unknown). Not a reduce's or an all-reduce's adding function."""
    if inst.opcode == "while":
        trip = _TRIP.search(inst.attrs)
        return [(c, int(trip.group(1)) if trip else 1) for k, c in _CALLS.findall(inst.attrs) if k == "body"]
    if inst.opcode not in ("fusion", "call", "conditional"):
        return []
    branches = [c for b in _BRANCHES.findall(inst.attrs) for c in re.findall(r"%?([\w.\-]+)", b)]
    return [(c, 1) for k, c in _CALLS.findall(inst.attrs)   # (XLA:CPU writes a call's callee as to_apply)
            if k in ("calls", "to_apply", "true_computation", "false_computation")] + [(c, 1) for c in branches]


def _feeds_only_a_share(inst: _Instruction, insts, computations, group_size: int) -> bool:
    """Whether every user of an all-reduce takes a dynamic-slice of 1/group_size of it (directly
    or in a fusion): XLA:CPU's form of a reduce-scatter, which accelerators run as one."""
    if len(inst.shapes) != 1:
        return False
    whole = inst.shapes[0].elements
    done = inst.name
    if inst.opcode == "all-reduce-start":  # the -done instruction carries the result
        done = next((i.name for i in insts if i.opcode == "all-reduce-done" and inst.name in i.operands), None)
        if done is None:
            return False
    users = [i for i in insts if done in i.operands]
    if not users:
        return False
    for user in users:
        if len(user.shapes) != 1 or user.shapes[0].elements * group_size != whole:
            return False
        if user.opcode == "dynamic-slice":
            continue
        called = [c for k, c in _CALLS.findall(user.attrs) if k == "calls"]
        if user.opcode == "fusion" and called and any(
                i.opcode == "dynamic-slice" for i in computations.get(called[0], ())):
            continue
        return False
    return True


_CONTRACTING = re.compile(r"lhs_contracting_dims=\{([\d,\s]*)\}")


def work_from_text(text: str) -> tuple[tuple[tuple[str, float], ...], float, float]:
    """(Matmul FLOPs per device by operand dtype, vector FLOPs per device, the largest matmul).
    Matmul: 2 x output elements x contracted size for every dot (and every convolution, its
    window and input features contracted). Vector (`ProgramAnalysis.vector_flops`): the
    elements of every multiply's result and of every reduce's input. Inside fusions too, times
    how often each computation runs (a loop whose trip count is unknown counts once). The
    largest (`ProgramAnalysis.largest_matmul`): one matmul's work in one run: a dot's, a
    convolution's, a sum of a product (`sum_of_products`: a matmul written as a multiply and
    a reduce), or an outer product (`outer_product_flops`: every pairwise product made at once,
    however it is summed later), not any other reduce (summing the steps' stacked results is no
    matmul)."""
    computations, entry = _parse_module(text)
    mult, _ = _multipliers(computations, entry)
    flops: dict[str, float] = defaultdict(float)
    vector = largest = 0.0
    for comp, insts in computations.items():
        by_name = {i.name: i for i in insts}
        runs = mult.get(comp)
        runs = 1 if runs is None else runs
        for inst in insts:
            dot = dot_flops(inst, by_name)
            if dot is not None:
                flops[dot[0]] += dot[1] * runs
                largest = max(largest, dot[1])
                continue
            if inst.opcode == "multiply" and inst.shapes:
                elements = inst.shapes[0].elements
                largest = max(largest, outer_product_flops(inst, by_name))
            elif inst.opcode == "reduce":
                elements = sum(s.elements for s in _operand_shapes(inst, by_name)[:max(len(inst.operands) // 2, 1)])
                product = sum_of_products(inst, by_name)
                if product is not None:
                    largest = max(largest, product[1])
            else:
                continue
            vector += elements * runs
    return tuple(sorted(flops.items())), vector, largest


_PASSES_A_PRODUCT = frozenset({"maximum", "minimum", "negate", "abs", "select", "clamp", "convert", "copy", "bitcast",
                               "bitcast-convert", "reshape", "transpose", "broadcast", "add", "subtract",
                               "reverse", "slice", "dynamic-slice", "pad", "concatenate", "gather"})
"""Ops a product stays a product through on its way to a sum: a split into its positive and
negative parts, a negation, a cast, a reshape, an added zero, and moves of its elements (a
flip, a slice, a pad, a concatenation, a gather), which change what is summed, not that it is."""


_MOVES_ITS_FIRST_OPERAND = frozenset({"dynamic-slice", "gather", "pad"})
"""Element moves whose other operands are not moved data (start indices, a padding value)."""


def summed_multiplies(reduce: _Instruction, by_name: dict) -> set[str]:
    """The multiplies whose products a reduce sums, reached through `_PASSES_A_PRODUCT` (an
    element move's data only, not its indices): empty for a sum of no product."""
    found, seen = set(), set()
    stack = list(reduce.operands[:max(len(reduce.operands) // 2, 1)])
    while stack:
        name = stack.pop()
        if name in seen or name not in by_name:
            continue
        seen.add(name)
        op = by_name[name]
        if op.opcode == "multiply":
            found.add(name)
        elif op.opcode in _PASSES_A_PRODUCT:
            stack += op.operands[:1] if op.opcode in _MOVES_ITS_FIRST_OPERAND else op.operands
    return found


def sum_of_products(inst: _Instruction, by_name: dict) -> tuple[str, float] | None:
    """(dtype, FLOPs) of a reduce that sums a product (a matmul written as a multiply and a sum,
    the product perhaps passed through `_PASSES_A_PRODUCT` first: `summed_multiplies`): 2 x the
    elements summed; None for any other instruction."""
    if inst.opcode != "reduce" or not summed_multiplies(inst, by_name):
        return None
    shapes = _operand_shapes(inst, by_name)[:max(len(inst.operands) // 2, 1)]
    return (shapes[0].dtype if shapes else "f32"), 2.0 * sum(s.elements for s in shapes)


def matmul_work(inst: _Instruction, by_name: dict) -> tuple[str, float] | None:
    """(type, FLOPs) of one instruction that does a matmul's work, as the step model and the
    ring rules count it: a dot or a convolution (`dot_flops`), or a reduce that sums a product
    (`sum_of_products`: a matmul written as a multiply and a sum). Not a lone multiply
    (`outer_product_flops`, left to `LargestMatmul`): XLA writes a product whose contracted
    size is 1 that way and fuses it with the next step's into one elementwise chain, which would
    read as products made outside the ring. None for any other instruction."""
    return dot_flops(inst, by_name) or sum_of_products(inst, by_name)


def _expanded(name: str, result: ArrayShape, by_name: dict) -> bool:
    """Is the value a broadcast of a computed value with fewer elements than `result` (after
    reshapes, copies and casts)?"""
    inst = _followed_through(name, by_name, _KEEPS_A_CONSTANT - {"broadcast"})
    if inst is None or inst.opcode != "broadcast" or not inst.operands or _constant(inst.operands[0], by_name):
        return False
    source = _operand_shapes(inst, by_name)
    return bool(source) and source[0].elements < result.elements


def outer_product_flops(inst: _Instruction, by_name: dict) -> float:
    """2 x the elements of a multiply of two computed values that are both broadcast to its
    shape (`a[:, :, None] * w[None]`: every pairwise product of a matmul, made at once, then
    summed by a reduce, a scatter-add, a running sum or a loop alike); 0 for any other
    instruction. A multiply of a value by a broadcast scale or mask is not one."""
    if inst.opcode != "multiply" or len(inst.operands) != 2 or len(inst.shapes) != 1:
        return 0.0
    result = inst.shapes[0]
    return 2.0 * result.elements if all(_expanded(o, result, by_name) for o in inst.operands) else 0.0


def _operand_shapes(inst: _Instruction, by_name: dict) -> list[ArrayShape]:
    """The shapes of `inst`'s operands, written inline or found by name."""
    if inst.inline_shapes:
        return list(inst.inline_shapes)
    return [by_name[o].shapes[0] for o in inst.operands if o in by_name and by_name[o].shapes]


_OPERAND_PRECISION = re.compile(r"operand_precision=\{([^}]*)\}")
_ALGORITHM = re.compile(r"\balgorithm=(dot_\w+)")
_PRECISION_ORDER = ("default", "high", "highest")


def matmul_type(dtype: str, attrs: str) -> str:
    """A dot's operand dtype and the precision it asks for, as the cost model prices it:
    ``f32`` (the default precision), ``f32/high``, ``f32/highest`` (`jax.lax.Precision`,
    the higher of the two operands'), or ``f32/dot_bf16_bf16_f32_x3`` (a named algorithm,
    `jax.lax.DotAlgorithmPreset`)."""
    algorithm = _ALGORITHM.search(attrs)
    if algorithm:
        return f"{dtype}/{algorithm.group(1)}"
    levels = _OPERAND_PRECISION.search(attrs)
    if not levels:
        return dtype
    ranks = [_PRECISION_ORDER.index(p.strip()) for p in levels.group(1).split(",") if p.strip() in _PRECISION_ORDER]
    level = _PRECISION_ORDER[max(ranks, default=0)]
    return dtype if level == "default" else f"{dtype}/{level}"


_KERNEL_LABELS = re.compile(r"dim_labels=\w*_(\w+)->")


def dot_flops(inst: _Instruction, by_name: dict) -> tuple[str, float] | None:
    """(operand type, FLOPs) of one dot instruction: 2 x output elements x contracted size;
    of one convolution: 2 x output elements x the kernel's elements per output feature (its
    window times its input features); the type is `matmul_type` (the dtype, with the
    precision the dot asks for); None for any other instruction (or one whose operand shapes
    are not in the text)."""
    if inst.opcode not in ("dot", "convolution") or len(inst.shapes) != 1:
        return None
    wanted = 2 if inst.opcode == "convolution" else 1
    if inst.inline_shapes:
        shapes = list(inst.inline_shapes)
    elif all(o in by_name and by_name[o].shapes for o in inst.operands[:wanted]):
        shapes = [by_name[o].shapes[0] for o in inst.operands[:wanted]]
    else:
        return None
    if len(shapes) < wanted:
        return None
    lhs = shapes[0]
    if inst.opcode == "convolution":
        labels = _KERNEL_LABELS.search(inst.attrs)
        kernel = shapes[1]
        out_features = (kernel.dims[labels.group(1).index("o")]
                        if labels and "o" in labels.group(1) and len(labels.group(1)) == len(kernel.dims) else 1)
        return matmul_type(lhs.dtype, inst.attrs), 2.0 * inst.shapes[0].elements * kernel.elements / max(out_features, 1)
    m = _CONTRACTING.search(inst.attrs)
    dims = [int(d) for d in m.group(1).split(",") if d.strip()] if m else []
    contracted = int(np.prod([lhs.dims[d] for d in dims if d < len(lhs.dims)], dtype=np.int64)) if dims else 1
    return matmul_type(lhs.dtype, inst.attrs), 2.0 * inst.shapes[0].elements * contracted


def _entry_io_bytes(text: str) -> tuple[int | None, int | None]:
    """Bytes of the entry computation's parameters and of its result."""
    computations, entry = _parse_module(text)
    insts = computations.get(entry, [])
    if not insts:
        return None, None
    args = sum(s.bytes for i in insts if i.opcode == "parameter" for s in i.shapes)
    root = insts[-1]
    for line in text.splitlines():
        m = re.match(r"^\s*ROOT\s+%?([\w.\-]+)", line)
        if m and any(i.name == m.group(1) for i in insts):
            root = next(i for i in insts if i.name == m.group(1))
    return args, sum(s.bytes for s in root.shapes)


_PASSES_EACH_ARRAY = frozenset({"optimization-barrier", "copy", "bitcast"})
"""Ops whose result is their one operand, array for array: each array keeps its own sources."""


class _Sources:
    """Which entry parameters each value of a program is computed from: a data-flow analysis
    from the entry's parameters through every instruction (an instruction's result is computed
    from everything its operands are), tuples and their elements, calls and fusions (their
    parameters are the caller's operands), conditionals (every branch; and a branch chosen by a
    value computed from a parameter makes the result computed from it too) and loops (the
    carried tuple, to a fixpoint over the runs; a loop that stops on a value computed from a
    parameter makes all it returns computed from it). Sources are bit masks (bit p: parameter
    p), one per array of a result (`_Instruction.shapes`, nested tuples flattened)."""

    def __init__(self, computations: dict, entry: str):
        self.computations = computations
        self.found: dict[tuple[str, str], tuple[int, ...]] = {}
        """(computation, instruction) -> sources of each array of its result, over every call."""
        self.runs: dict[tuple, tuple[int, ...]] = {}
        params = [i for i in computations.get(entry, ()) if i.opcode == "parameter" and i.parameter is not None]
        self.every = sum(1 << i.parameter for i in params)
        self.floats = sum(1 << i.parameter for i in params
                          if any(s.dtype.startswith(("f", "bf", "c")) for s in i.shapes))
        """The entry parameters that hold floating-point arrays: what activations come from."""
        if entry in computations:
            self.run(entry, None)

    def run(self, comp: str, params: tuple | None) -> tuple[int, ...]:
        """The sources of each array `comp` returns, its parameters' sources being `params`
        ((number, sources of each array), ...; None for the entry: each parameter its own)."""
        key = (comp, params)
        if key in self.runs:
            return self.runs[key]
        given = dict(params or ())
        known: dict[str, tuple[int, ...]] = {}
        by_name = {i.name: i for i in self.computations.get(comp, ())}
        root: tuple[int, ...] = ()
        for inst in self.computations.get(comp, ()):
            if inst.opcode == "parameter":
                n = inst.parameter if inst.parameter is not None else -1
                mine = (1 << n) if params is None and n >= 0 else 0
                arrays = given.get(n, (mine,) * len(inst.shapes))
            else:
                arrays = self._transfer(inst, known, by_name)
            if len(arrays) != len(inst.shapes):  # a shape this reader did not follow: from all of them
                arrays = (self._union(arrays),) * len(inst.shapes)
            known[inst.name] = arrays
            old = self.found.get((comp, inst.name))
            self.found[(comp, inst.name)] = arrays if old is None else tuple(a | b for a, b in zip(old, arrays))
            if inst.root:
                root = arrays
        if not root and self.computations.get(comp):
            root = known[self.computations[comp][-1].name]
        self.runs[key] = root
        return root

    @staticmethod
    def _union(arrays) -> int:
        out = 0
        for a in arrays:
            out |= a
        return out

    def _operand(self, name: str, known: dict) -> tuple[int, ...]:
        # An operand not seen yet (the text out of order): computed from every parameter.
        return known.get(name, (self.every,))

    def _called(self, comp: str, operands: list[tuple[int, ...]]) -> tuple[int, ...]:
        """Run `comp` with parameter i computed from operand i's sources."""
        params = tuple(sorted((i.parameter, operands[i.parameter] if i.parameter < len(operands)
                               else (self.every,) * len(i.shapes))
                              for i in self.computations.get(comp, ())
                              if i.opcode == "parameter" and i.parameter is not None))
        return self.run(comp, params)

    def _transfer(self, inst: _Instruction, known: dict, by_name: dict) -> tuple[int, ...]:
        operands = [self._operand(o, known) for o in inst.operands]
        everything = self._union(a for op in operands for a in op)
        calls = _CALLS.findall(inst.attrs)
        if inst.opcode == "tuple":
            return tuple(a for op in operands for a in op)
        if inst.opcode == "get-tuple-element" and operands:
            index = re.search(r"\bindex=(\d+)", inst.attrs)
            parts = by_name[inst.operands[0]].parts if inst.operands[0] in by_name else ()
            if index and parts and int(index.group(1)) < len(parts):
                start = sum(parts[:int(index.group(1))])
                return operands[0][start:start + parts[int(index.group(1))]]
            return (everything,) * len(inst.shapes)
        if inst.opcode in _PASSES_EACH_ARRAY and len(operands) == 1:
            return operands[0]
        if inst.opcode in ("fusion", "call") and calls:
            return self._called(calls[0][1], operands)
        if inst.opcode == "while" and operands:
            body = next((c for k, c in calls if k == "body"), None)
            condition = next((c for k, c in calls if k == "condition"), None)
            carried = operands[0]
            while body is not None:
                after = self._called(body, [carried])
                grown = tuple(a | b for a, b in zip(carried, after)) if len(after) == len(carried) \
                    else (self._union(carried) | self._union(after),) * len(carried)
                if grown == carried:
                    break
                carried = grown
            stops_on = self._union(self._called(condition, [carried])) if condition else 0
            return tuple(a | stops_on for a in carried)
        if inst.opcode == "conditional" and operands:
            branches = [c for k, c in calls if k in ("true_computation", "false_computation")]
            branches += [c for b in _BRANCHES.findall(inst.attrs) for c in re.findall(r"%?([\w.\-]+)", b)]
            chosen_by = self._union(operands[0])
            results = [self._called(c, [operands[i + 1]] if i + 1 < len(operands) else [])
                       for i, c in enumerate(branches)]
            width = len(inst.shapes)
            return tuple(chosen_by | self._union(r[j] for r in results if len(r) == width) for j in range(width))
        for _, callee in calls:  # a reduce's adder, a sort's comparator: computed from all operands
            self._run_with(callee, everything)
        return (everything,) * len(inst.shapes)

    def _run_with(self, comp: str, sources: int) -> None:
        """Run `comp` with every parameter computed from `sources` (what the instruction that
        calls it reads), so that the values it computes are read too."""
        params = tuple(sorted((i.parameter, (sources,) * len(i.shapes)) for i in self.computations.get(comp, ())
                              if i.opcode == "parameter" and i.parameter is not None))
        self.run(comp, params)

    def values(self, comp: str, inst: _Instruction) -> tuple[int, ...] | None:
        """The sources of each array of `inst`'s result, or None when no run reached it."""
        return self.found.get((comp, inst.name))


def _written_values(inst: _Instruction) -> tuple[ArrayShape, ...]:
    """The arrays an instruction makes, as the program wrote them. XLA:CPU passes the array of
    a `jax.lax.all_to_all` as one operand per device of the group (a tuple of equal blocks):
    the array the program sends, and holds, is their concatenation, one value ([nX, chunk, D]
    for a round of tokens, not nX blocks of [1, chunk, D])."""
    shapes = inst.shapes
    if inst.opcode == "all-to-all" and len(shapes) > 1 and len(set(shapes)) == 1 and shapes[0].dims:
        block = shapes[0]
        return (ArrayShape(block.dtype, (len(shapes) * block.dims[0],) + block.dims[1:]),)
    return shapes


def _rounds_in_pieces(insts: list[_Instruction], origin=lambda inst: (None, False)) -> list[Value]:
    """All-to-alls of one computation none of which is computed from another: all are in flight
    at once, so together they are one round's buffer (a round's tokens split along D, or sent in
    pieces of other shapes or types, is still the round). Each such set is one value: its pieces
    joined along the last dimension where they share a type and all other dimensions (as
    `_written_values` joins one all-to-all's blocks), and, where their shapes or types differ,
    all of them as one float32 array as large as their sizes together (`ArrayShape.size`).
    `origin(inst)`: (`Value.sources`, `Value.bookkeeping`) of an all-to-all's result; a joined
    value is computed from what its pieces are, and is bookkeeping only if every piece is."""
    sent = [(inst, shapes[0]) for inst in insts if inst.opcode == "all-to-all"
            and len(shapes := _written_values(inst)) == 1 and shapes[0].dims]
    if len(sent) < 2:
        return []
    by_name = {i.name: i for i in insts}
    names = {inst.name for inst, _ in sent}

    def sources(inst: _Instruction) -> set[str]:
        """The all-to-alls of `sent` that `inst` is computed from."""
        found, seen, stack = set(), set(), list(inst.operands)
        while stack:
            name = stack.pop()
            if name in seen or name not in by_name:
                continue
            seen.add(name)
            if name in names:
                found.add(name)
            stack += by_name[name].operands
        return found

    groups: list[list[tuple[_Instruction, ArrayShape, set[str]]]] = []
    for inst, shape in sent:
        needs = sources(inst)
        group = next((g for g in groups if not any(other.name in needs or inst.name in other_needs
                                                   for other, _, other_needs in g)), None)
        if group is None:
            groups.append([(inst, shape, needs)])
        else:
            group.append((inst, shape, needs))
    joined = []
    for g in (g for g in groups if len(g) >= 2):
        kinds: dict[tuple, list[tuple[_Instruction, ArrayShape]]] = defaultdict(list)
        for inst, shape, _ in g:
            kinds[(shape.dtype, shape.dims[:-1])].append((inst, shape))
        for (dtype, dims), pieces in kinds.items():
            if len(pieces) >= 2:
                joined.append(Value("+".join(inst.name for inst, _ in pieces),
                                    ArrayShape(dtype, dims + (sum(s.dims[-1] for _, s in pieces),)), "all-to-all",
                                    *_joined_origin([origin(inst) for inst, _ in pieces])))
        if len(kinds) >= 2:
            joined.append(Value("+".join(inst.name for inst, _, _ in g),
                                ArrayShape("f32", (sum(s.size for _, s, _ in g),)), "all-to-all",
                                *_joined_origin([origin(inst) for inst, _, _ in g])))
    return joined


def _joined_origin(origins: list[tuple]) -> tuple:
    """(sources, bookkeeping) of a value made of pieces with `origins`."""
    if any(sources is None for sources, _ in origins):
        return None, False
    return tuple(sorted({i for sources, _ in origins for i in sources})), all(b for _, b in origins)


@functools.lru_cache(maxsize=2)  # read once per analysis
def _data_flow(text: str) -> _Sources:
    return _Sources(*_parse_module(text))


def values_from_text(text: str, top: int = 10, arguments: tuple[int, ...] | None = None) -> list[Value]:
    """The largest values computed outside fusion bodies (parameters excluded), each with the
    arguments it is computed from and whether it is bookkeeping (`Value`). `arguments`: the
    position in the call of the argument each entry parameter holds (JAX leaves unused
    arguments out of the program, so parameter 0 may be the second argument); None when
    parameter p holds argument p."""
    computations, entry = _parse_module(text)
    _, fused = _multipliers(computations, entry)
    flow = _data_flow(text)

    def origin(mask: int | None) -> tuple:
        if mask is None:  # in a computation the data flow did not reach (a custom call's): counted
            return None, False
        return _positions(mask, arguments), not mask & flow.floats

    values = []
    for comp, insts in computations.items():
        if comp in fused:
            continue

        def whole(inst: _Instruction, comp=comp) -> tuple:
            arrays = flow.values(comp, inst)
            return origin(None if arrays is None else _Sources._union(arrays))

        for inst in insts:
            if inst.opcode in ("parameter", "get-tuple-element", "tuple", "constant", "bitcast"):
                continue
            shapes, arrays = _written_values(inst), flow.values(comp, inst)
            if arrays is not None and len(arrays) == len(shapes):
                values += [Value(inst.name, shape, inst.opcode, *origin(mask)) for shape, mask in zip(shapes, arrays)]
            else:  # one array written as several (`_written_values`)
                values += [Value(inst.name, shape, inst.opcode, *whole(inst)) for shape in shapes]
        values += _rounds_in_pieces(insts, whole)
    # Ranked as the memory rules measure them (`values_at_least`), so that no value those rules
    # would flag is pushed out of the top by values they would not: activations first.
    values.sort(key=lambda v: (v.bookkeeping, -v.shape.size))
    return values[:top]


def analyze_text(text: str, mesh_shape, axis_names, temp_bytes: int | None = None,
                 flops: float | None = None, bytes_accessed: float | None = None,
                 argument_bytes: int | None = None, output_bytes: int | None = None,
                 arguments: tuple[int, ...] | None = None) -> ProgramAnalysis:
    """Analyze compiled HLO text. `arguments`: the call's position of the argument each entry
    parameter holds (`values_from_text`), None when parameter p holds argument p."""
    if argument_bytes is None or output_bytes is None:
        args, outs = _entry_io_bytes(text)
        argument_bytes = args if argument_bytes is None else argument_bytes
        output_bytes = outs if output_bytes is None else output_bytes
    from .steps import stages_from_text  # reads the HLO with this module's parser

    collectives = tuple(collectives_from_text(text, tuple(mesh_shape), tuple(axis_names), arguments))
    dot_work, vector_work, largest_work = work_from_text(text)
    return ProgramAnalysis(
        collectives=collectives,
        largest_values=tuple(values_from_text(text, arguments=arguments)),
        temp_bytes=temp_bytes,
        num_devices=int(np.prod(mesh_shape)),
        flops=flops,
        bytes_accessed=bytes_accessed,
        argument_bytes=argument_bytes,
        output_bytes=output_bytes,
        dot_flops=dot_work,
        vector_flops=vector_work,
        largest_matmul=largest_work,
        mesh_shape=tuple(int(n) for n in mesh_shape),
        axis_names=tuple(axis_names),
        stages=stages_from_text(text, collectives),
    )


_ANALYZED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
"""Analyses by compiled program (and mesh), for as long as the program lives: cases that
share a compilation (problem2's routings) share its analysis (`ProgramAnalysis` is frozen)."""


def analyze(compiled, mesh) -> ProgramAnalysis:
    """Analyze a `jax.stages.Compiled` program that runs on `mesh`."""
    on = (tuple(mesh.devices.shape), tuple(mesh.axis_names))
    known = _ANALYZED.get(compiled)
    if known is not None and known[0] == on:
        return known[1]
    analysis = _analyze(compiled, on)
    _ANALYZED[compiled] = (on, analysis)
    return analysis


def _analyze(compiled, on: tuple) -> ProgramAnalysis:
    try:
        memory = compiled.memory_analysis()
        temp = int(memory.temp_size_in_bytes)
        argument_bytes, output_bytes = int(memory.argument_size_in_bytes), int(memory.output_size_in_bytes)
    except Exception:  # some backends report no memory statistics
        temp = argument_bytes = output_bytes = None
    try:
        costs = compiled.cost_analysis()
        costs = costs[0] if isinstance(costs, (list, tuple)) else costs
        flops, accessed = float(costs.get("flops", 0.0)), float(costs.get("bytes accessed", 0.0))
    except Exception:  # no cost analysis on this backend
        flops = accessed = None
    return analyze_text(compiled.as_text(), *on, temp, flops, accessed, argument_bytes, output_bytes,
                        _kept_arguments(compiled))


def _kept_arguments(compiled) -> tuple[int, ...] | None:
    """The position in the call of the argument each entry parameter of `compiled` holds: JAX
    leaves the arguments a program never reads out of it (`jax.jit`'s keep_unused=False), so
    that parameter 0 is the second argument when the first is unused. None when JAX does not
    say (then parameter p is read as argument p)."""
    kept = getattr(getattr(compiled, "_executable", None), "_kept_var_idx", None)
    try:
        return tuple(sorted(int(i) for i in kept)) if kept is not None else None
    except TypeError:
        return None
