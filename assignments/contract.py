"""The shape of an exercise contract: what a graded function takes, returns and may communicate.

Each assignment's contract lives once, in `assignments/contracts/<assignment>.py`, and
drives the visible checks, the graders' hidden configurations and the reports.
The binding text is the course's PROBLEMS.md; these objects are that text in code.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import re
from typing import TYPE_CHECKING, Any, Callable, Mapping

import numpy as np

if TYPE_CHECKING:
    from .hlo import ProgramAnalysis

MESH_AXES = ("X", "Y")


@dataclasses.dataclass(frozen=True)
class Arg:
    """One array argument or result of a graded function."""

    name: str
    """The name the problem uses (``A``, ``W``, ...)."""
    dims: tuple[str, ...]
    """Symbolic sizes, resolved per case; ``nX`` and ``nY`` are the mesh's axis sizes."""
    spec: tuple
    """PartitionSpec entries over the mesh axes ``('X', 'Y')``."""
    dtype: str = "float32"
    high: str | None = None
    """Integer arguments only: values lie in [0, high), a symbolic size such as ``'E'``."""

    def shape(self, case: "Case") -> tuple[int, ...]:
        sizes = case.all_sizes
        return tuple(sizes[d] if isinstance(d, str) else int(d) for d in self.dims)

    def splits(self, case: "Case") -> tuple[int, ...]:
        """Over how many devices each dimension is split on `case`'s mesh (1: kept whole)."""
        sizes = dict(zip(MESH_AXES, case.mesh))
        entries = tuple(self.spec) + (None,) * (len(self.dims) - len(self.spec))
        return tuple(math.prod(sizes[a] for a in (e if isinstance(e, tuple) else (e,) if e else ()))
                     for e in entries[:len(self.dims)])

    @property
    def partition_spec(self):
        """The `jax.sharding.PartitionSpec` (JAX loads only here: the graders' parent reads
        contracts without it)."""
        from jax.sharding import PartitionSpec

        return PartitionSpec(*self.spec)

    def describe(self, case: "Case | None" = None) -> str:
        dims = self.shape(case) if case else self.dims
        return f"{self.name}: {self.dtype}[{', '.join(map(str, dims))}] at {self.partition_spec}"


@dataclasses.dataclass(frozen=True)
class Tree:
    """A tuple of arguments or results that travel together as one pytree, e.g. the
    parameters ``params = (w, b)`` of a training step, or its result ``(params, loss)``.
    Graded leaf by leaf, in order (any container with the same leaves is accepted)."""

    name: str
    items: tuple
    """The members, each an `Arg` or a nested `Tree`."""

    @property
    def leaves(self) -> tuple[Arg, ...]:
        return tuple(leaf for item in self.items for leaf in arg_leaves(item))

    def describe(self, case: "Case | None" = None) -> str:
        return f"{self.name} = ({', '.join(item.describe(case) for item in self.items)})"


def arg_leaves(arg) -> tuple[Arg, ...]:
    """The `Arg`s inside an `Arg` or a `Tree`, in order."""
    return arg.leaves if isinstance(arg, Tree) else (arg,)


def map_args(fn, arg, value):
    """Apply ``fn(value_leaf, arg_leaf)`` leaf by leaf, keeping `arg`'s nesting (as tuples)."""
    if isinstance(arg, Tree):
        return tuple(map_args(fn, item, v) for item, v in zip(arg.items, value))
    return fn(value, arg)


@dataclasses.dataclass(frozen=True)
class Case:
    """One configuration a graded function is called with: a mesh, sizes, static arguments."""

    mesh: tuple[int, int]
    """(nX, nY)."""
    sizes: Mapping[str, int]
    """The problem's sizes, e.g. ``{'S': 16, 'D': 8}``."""
    statics: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """Static keyword arguments, e.g. ``{'shift': 3}``."""

    @property
    def all_sizes(self) -> dict[str, int]:
        return {"nX": self.mesh[0], "nY": self.mesh[1], **self.sizes}

    @property
    def label(self) -> str:
        parts = [f"mesh {self.mesh[0]}x{self.mesh[1]}"]
        parts += [f"{k}={v}" for k, v in self.sizes.items()]
        parts += [f"{k}={v}" for k, v in self.statics.items()]
        return ", ".join(parts)

    def to_json(self) -> dict:
        return {"mesh": list(self.mesh), "sizes": dict(self.sizes), "statics": dict(self.statics)}


@dataclasses.dataclass(frozen=True)
class Part:
    """One graded function."""

    name: str
    """The function's name, as students define it."""
    points: float
    task: str
    """One sentence: what it computes and how."""
    args: tuple[Arg, ...]
    result: Arg
    rules: tuple
    """Every rule the function's program must keep, in one declared list: on its compiled
    program's communication, memory and work (`assignments.rules`), and on how it is written
    (`assignments.style_rules`: jax.jit only, with shard_map, the work inside it, an argument
    kept on its axis, a collective written by the student). `python -m assignments.rules`
    lists them with their ids and explanations."""
    reference: Callable[..., np.ndarray]
    """Dense float64 NumPy reference: ``reference(*arrays, mesh=(nX, nY), **statics)``."""
    visible_case: Case
    """The one small configuration the notebook's visible check uses."""
    statics: tuple[str, ...] = ()
    """Names of static keyword arguments (after ``mesh``)."""
    eager: bool = False
    """Called eagerly on concrete arrays, not traced: graded on the result's shape, dtype,
    sharding and values as reported by the submission's process (no artifact, no HLO)."""
    values_hint: str = ""
    """Appended to a wrong-values message: the mistake it usually means and where to look."""
    hint_when: Callable | None = None
    """The reference of the mistake `values_hint` names (same signature as `reference`):
    when given, the hint is shown only if the result matches it, never on other wrong values."""
    case_note: Callable | None = None
    """``case_note(case) -> str``: appended to a wrong-values message on a case it has
    something to say about (empty otherwise): what sets the case apart from the visible one,
    which code that passes the visible check often gets wrong (roll_diff: a shift past the
    rows of a shard). It may quote the case's sizes and statics, never an input value."""
    axis_types: str = "auto"
    """The mesh's axis types for this function: ``'auto'`` (the course's default) or
    ``'explicit'`` (`jax.sharding.AxisType.Explicit`: shardings are part of the types)."""
    inputs: Callable | None = None
    """Optional generator of well-conditioned inputs: ``inputs(case, rng) -> list`` of
    arrays (a tuple of arrays for a `Tree` argument). Default: `make_inputs`'s."""
    baseline: Callable | None = None
    """The plain `jax.jit` version of the same computation (same signature), shown beside
    the student's in the visible check's cost table."""
    cost_case: Case | None = None
    """Where the cost table compares the student's function with `baseline`: usually the
    book's sizes (compiled from abstract inputs, never run)."""
    takes_mesh: bool = True
    """False for a single-device function called without ``mesh`` (e.g. problem2's
    ``moe_local(W, A, B)``): its cases use a 1x1 mesh, so every argument sits on one device."""

    @property
    def rule(self):
        """The rules on the compiled program (communication, memory, work), as one: what the
        visible check states as allowed, and what runs after the program ran."""
        from .rules import AllOf

        compiled = tuple(r for r in self.rules if not r.reads_lowered)
        return compiled[0] if len(compiled) == 1 else AllOf(compiled)

    @property
    def style_rules(self) -> tuple:
        """The rules on how the function is written, read from its lowered program, in order."""
        return tuple(r for r in self.rules if r.reads_lowered)

    def call_kwargs(self, mesh, statics) -> dict:
        """The keyword arguments the function is called with: ``mesh`` (unless it takes
        none), then the static arguments."""
        return ({"mesh": mesh} if self.takes_mesh else {}) | dict(statics)

    @property
    def signature(self) -> str:
        names = [a.name for a in self.args]
        keywords = (("mesh",) if self.takes_mesh else ()) + self.statics
        return f"{self.name}({', '.join(names)}{', *, ' + ', '.join(keywords) if keywords else ''})"


@dataclasses.dataclass(frozen=True)
class WrittenPart:
    """A manually graded written answer."""

    name: str
    points: float
    prompt: str


@dataclasses.dataclass(frozen=True)
class Assignment:
    name: str
    title: str
    parts: tuple[Part, ...]
    written: tuple[WrittenPart, ...] = ()
    book_url: str = ""
    inputs: Callable | None = None
    """``inputs(part, case, seed) -> list``: every case's input arrays, visible and hidden, when
    a case's sizes name more than shapes (problem2's ``experts_used``, the routing); default
    `make_inputs`. The seed is the only secret: a check run at a hidden case's label gets
    inputs of the same kind as the graders'."""

    def part(self, name: str) -> Part:
        for p in self.parts:
            if p.name == name:
                return p
        known = ", ".join(p.name for p in self.parts)
        raise KeyError(f"{self.name} has no graded function {name!r}; it has: {known}")

    @property
    def max_score(self) -> float:
        return sum(p.points for p in self.parts) + sum(w.points for w in self.written)


def case_request(part: Part, case: Case, case_id: str) -> dict:
    """One case as the export worker reads it (JSON): mesh, argument specs, statics."""
    def request(a):
        if isinstance(a, Tree):
            return {"tree": [request(item) for item in a.items]}
        return {"shape": list(a.shape(case)), "dtype": a.dtype, "spec": list(a.spec)}

    return {
        "id": case_id, "mesh": list(case.mesh), "statics": dict(case.statics),
        "args": [request(a) for a in part.args],
        "axis_types": part.axis_types,
        "takes_mesh": part.takes_mesh,
    }


SHARD_MAP_OPS = frozenset({"sdy.manual_computation", "custom_call:SPMDFullToShardShape",
                           "custom_call:SPMDShardToFullShape"})
"""How a shard_map shows in a lowered program: Shardy's manual computation, or GSPMD's
conversions into and out of the manual region."""


@functools.lru_cache(maxsize=16)
def program_ops(stablehlo_text: str) -> frozenset[str]:
    """The operation names of a lowered (StableHLO) program, parsed, with each custom call
    as ``custom_call:<target>``. Locations, names and scopes play no part, so a
    `jax.named_scope("manual_computation")` is not mistaken for a shard_map. Cached: a
    judge reads each program's operations before compiling it and again for each of its
    cases (problem2's routings share a program)."""
    from jax._src.interpreters import mlir
    from jax._src.lib.mlir import ir

    names: set[str] = set()

    def visit(op):
        names.add(op.name)
        if op.name == "stablehlo.custom_call" and "call_target_name" in op.attributes:
            names.add("custom_call:" + ir.StringAttr(op.attributes["call_target_name"]).value)
        return ir.WalkResult.ADVANCE

    with mlir.make_ir_context():
        ir.Module.parse(stablehlo_text).operation.walk(visit)
    return frozenset(names)


def check_call(part: Part, case: Case) -> str:
    """The call that runs `part`'s visible check at `case`'s mesh, sizes and statics, on inputs
    of the check's own: what a hidden case's message tells the student to run."""
    return f"check({part.name}, case={case.label!r})"


class DataFlow:
    """Backward data flow in a lowered (StableHLO) program: which of the program's arguments a
    value is computed from. Followed through calls (a function's argument is what its callers
    pass; a call's result what the function returns), into and out of shard_maps (Shardy's
    manual computations), loops (a carried value is its initial value and what the body
    carries on) and branches (a result is what each branch returns, and the predicate). Any
    other region's argument (a reduction's, a sort's) counts everything its operation takes.
    Use inside the MLIR context the module was parsed in."""

    def __init__(self, module):
        from jax._src.lib.mlir import ir

        self.ir = ir
        self.functions = {ir.StringAttr(f.attributes["sym_name"]).value: f
                          for f in (o.operation for o in module.body.operations) if f.name == "func.func"}
        self.calls: dict[str, list] = {}
        # Memos, per value: a program's collectives share most of what they are computed
        # from, and each step back through MLIR's Python objects is slow.
        self._steps_back: dict = {}
        self._sizes: dict = {}
        self._found: dict = {}
        self._combines: dict = {}
        self.mesh: list[tuple[str, int]] = []
        """The mesh's axes and sizes, in order (Shardy's first `sdy.mesh`)."""

        def index(operation):
            operation = operation.operation  # (an OpView's name is its symbol's, not its kind)
            callee = called_function(operation)
            if callee is not None:
                self.calls.setdefault(callee, []).append(operation)
            elif operation.name == "sdy.mesh" and not self.mesh:
                self.mesh = [(a, int(n)) for a, n in re.findall(r'"(\w+)"=(\d+)', str(operation.attributes["mesh"]))]
            return ir.WalkResult.ADVANCE

        module.operation.walk(index)

    def is_entry(self, function) -> bool:
        return self.ir.StringAttr(function.attributes["sym_name"]).value not in self.calls

    @staticmethod
    def _returned(region, k: int) -> list:
        """Operand k of the terminator of each block of `region` (what it returns)."""
        out = []
        for block in region.blocks:
            ops = list(block.operations)
            if ops and k < len(ops[-1].operation.operands):
                out.append(ops[-1].operation.operands[k])
        return out

    def _back(self, values, stop=lambda v: False):
        """Every value `values` are computed from (themselves included), each once, not
        going back past a value where `stop(value)` holds."""
        seen, stack = set(), list(values)
        while stack:
            v = stack.pop()
            if v in seen:
                continue
            seen.add(v)
            v = v.maybe_downcast()
            yield v
            if not stop(v):
                stack += self._feeding(v)

    def _size(self, v) -> float:
        if v not in self._sizes:
            self._sizes[v] = _elements(v)
        return self._sizes[v]

    def _entry_argument(self, v) -> int | None:
        """The position of `v` among the entry function's arguments, if it is one."""
        if isinstance(v, self.ir.BlockArgument) and v.owner.owner.operation.name == "func.func" \
                and self.is_entry(v.owner.owner.operation):
            return v.arg_number
        return None

    def _shard_map_result(self, v):
        """The shard_map (Shardy's manual computation) `v` is a result of, if any."""
        if isinstance(v, self.ir.OpResult) and v.owner.operation.name == "sdy.manual_computation":
            return v.owner.operation
        return None

    def sources(self, values, narrower_than: int = 0) -> frozenset[int]:
        """Positions of the entry function's arguments that `values` are computed from. With
        `narrower_than`, not through a value of fewer elements (see `carried_sources`)."""
        return self._arguments(("all", tuple(values), narrower_than), values,
                               lambda v: self._size(v) < narrower_than)

    def carried_sources(self, values, narrower_than: int = 0) -> frozenset[int]:
        """Positions of the entry function's arguments that `values` carry as they are: found
        without going back through a product (`is_product`: a matmul, a convolution, a sum of
        products), which makes results out of an argument rather than moving it. Reshapes,
        casts, bits reinterpreted and arithmetic with other data all still carry it. With
        `narrower_than` (one row of an argument), not through a value of fewer elements
        either: a number made from the tokens (``A[0, 0] - A[0, 0]``) carries none of them."""
        return self._arguments(("carried", tuple(values), narrower_than), values,
                               lambda v: (is_product(v) and self._makes_results(v)) or self._size(v) < narrower_than)

    def _arguments(self, key: tuple, values, stop) -> frozenset[int]:
        """The entry function's arguments `_back(values, stop)` reaches, remembered under `key`."""
        if key not in self._found:
            self._found[key] = frozenset(n for n in map(self._entry_argument, self._back(values, stop))
                                         if n is not None)
        return self._found[key]

    def _makes_results(self, product) -> bool:
        """Does a product (`is_product`) combine two values computed from the program's
        arguments? One with a constant (an identity, a permutation, a selection matrix) only
        moves the one argument it takes."""
        if product not in self._combines:
            self._combines[product] = self._combines_two(product)
        return self._combines[product]

    def _combines_two(self, product) -> bool:
        owner = product.owner.operation
        operands = list(owner.operands)
        if owner.name == "stablehlo.reduce":  # a sum of products: what the multiply multiplies
            operands = [o for v in operands if isinstance(m := v.maybe_downcast(), self.ir.OpResult)
                        and m.owner.operation.name == "stablehlo.multiply" for o in m.owner.operation.operands]
        return sum(1 for o in operands if self.sources([o])) >= 2

    def only_through(self, values, operations: frozenset[str]) -> bool:
        """Are `values` the program's arguments passed on through `operations` alone?"""
        return all(isinstance(v, self.ir.BlockArgument) or v.owner.operation.name in operations
                   for v in self._back(values))

    def from_split_data(self, values) -> bool:
        """Are `values` computed from data split over the devices: an argument of the entry
        function, or a result of a shard_map, whose sharding splits a dimension? (A shard_map's
        replicated result, its psum, is where such data stops: what jax.jit does with it
        afterwards is a copy's tidying, not work over the devices. Unless the result only
        claims to be replicated: `_split_inside`.)"""
        for v in self._back(values, stop=lambda v: self._shard_map_result(v) is not None):
            n, shard_map = self._entry_argument(v), self._shard_map_result(v)
            if n is not None:
                attrs = arg_attrs(v.owner.owner.operation)
                if n < len(attrs) and _is_sharded(attrs[n]):
                    return True
            elif shard_map is not None:
                specs = _specs(shard_map, "out_shardings")
                k = v.result_number
                if k >= len(specs) or re.search(r'"\w+"', specs[k]) or self._split_inside(shard_map, k):
                    return True
        return False

    def _split_inside(self, shard_map, k: int) -> bool:
        """Is result k of a shard_map, declared replicated (out_specs P()), computed inside it
        from an argument split over some mesh axis without a psum or all_gather over that axis
        on the way (check_vma=False lets a shard_map declare each device's own block
        replicated, for jax.jit to work on outside)? Each path back carries the axes its
        collectives made the data whole over: a psum in groups of one device makes nothing."""
        every_axis = frozenset(a for a, _ in self.mesh)
        stack = [(v, frozenset()) for v in self._returned(shard_map.regions[0], k)]
        seen = set()
        while stack:
            v, whole = stack.pop()
            if (v, whole) in seen:
                continue
            seen.add((v, whole))
            v = v.maybe_downcast()
            if isinstance(v, self.ir.BlockArgument) and v.owner.owner.operation.name == "sdy.manual_computation":
                specs = _specs(v.owner.owner.operation, "in_shardings")
                if v.arg_number < len(specs) and set(re.findall(r'"(\w+)"', specs[v.arg_number])) - whole:
                    return True
                continue
            if isinstance(v, self.ir.OpResult) and v.owner.operation.name in _MAKES_REPLICAS:
                whole = whole | self._group_axes(v.owner.operation)
                if every_axis and whole >= every_axis:
                    continue
            stack += [(u, whole) for u in self._feeding(v)]
        return False

    def _group_axes(self, collective) -> frozenset[str]:
        """The mesh axes a psum or all_gather combines over (`collective_axes` on this
        program's mesh): none for groups of one device."""
        return collective_axes(collective, tuple(n for _, n in self.mesh), tuple(a for a, _ in self.mesh))

    def _feeding(self, v) -> list:
        """The values one step back from `v` (as `sources` follows them)."""
        if v not in self._steps_back:
            self._steps_back[v] = self._one_step_back(v)
        return self._steps_back[v]

    def _one_step_back(self, v) -> list:
        ir = self.ir
        if isinstance(v, ir.BlockArgument):
            parent, n = v.owner.owner.operation, v.arg_number
            if parent.name == "func.func":
                name = ir.StringAttr(parent.attributes["sym_name"]).value
                return [c.operands[n] for c in self.calls.get(name, []) if n < len(c.operands)]
            if parent.name == "sdy.manual_computation" and n < len(parent.operands):
                return [parent.operands[n]]
            if parent.name == "stablehlo.while" and n < len(parent.operands):
                return [parent.operands[n]] + self._returned(parent.regions[1], n)
            return list(parent.operands)
        owner, k = v.owner.operation, v.result_number
        if (name := called_function(owner)) is not None:
            callee = self.functions.get(name)
            return self._returned(callee.regions[0], k) if callee is not None else list(owner.operands)
        if owner.name == "stablehlo.while" and k < len(owner.operands):
            # and the condition: how many times the body ran carries what the condition read
            return [owner.operands[k]] + self._returned(owner.regions[1], k) + self._returned(owner.regions[0], 0)
        if owner.name in ("stablehlo.case", "stablehlo.if"):
            return list(owner.operands) + [r for region in owner.regions for r in self._returned(region, k)]
        if owner.name == "sdy.manual_computation":
            return self._returned(owner.regions[0], k)
        if _is_nothing(owner):
            return []
        return list(owner.operands)


_ZERO = re.compile(r"dense<(?:[-+]?0(?:\.0*)?(?:e[-+]?\d+)?|false|\(0(?:\.0*)?(?:e[-+]?\d+)?,\s*0(?:\.0*)?(?:e[-+]?\d+)?\))>")
"""A splat constant of zeros as MLIR prints it (``dense<0.000000e+00>``, ``dense<0>``)."""


def _is_zero(value) -> bool:
    """Is `value` a constant zero, through broadcasts, reshapes and casts?"""
    from jax._src.lib.mlir import ir

    value = value.maybe_downcast()
    while isinstance(value, ir.OpResult) and value.owner.operation.name in (
            "stablehlo.broadcast_in_dim", "stablehlo.reshape", "stablehlo.convert"):
        value = value.owner.operation.operands[0].maybe_downcast()
    return isinstance(value, ir.OpResult) and value.owner.operation.name == "stablehlo.constant" \
        and bool(_ZERO.match(str(value.owner.operation.attributes["value"])))


def _is_nothing(operation) -> bool:
    """Is `operation`'s result the same whatever its operands hold: a product with a constant
    zero (``0 * W``), or a value minus (or xor) itself? What it is computed from is then
    nothing: an identity made ``computed from W`` by adding ``0 * W`` is still the identity."""
    operands = list(operation.operands)
    if operation.name == "stablehlo.multiply":
        return any(_is_zero(o) for o in operands)
    if operation.name in ("stablehlo.subtract", "stablehlo.xor") and len(operands) == 2:
        return operands[0] == operands[1]
    return False


_MAKES_REPLICAS = frozenset({"stablehlo.all_reduce", "stablehlo.all_gather"})
"""Collectives whose result a shard_map may return replicated (a psum, an all_gather) over the
axes they combine (`DataFlow._group_axes`); an all_to_all or a reduce-scatter leaves each
device a different piece."""


def collective_axes(operation, mesh_shape: tuple[int, ...], axis_names: tuple[str, ...]) -> frozenset[str]:
    """The mesh axes a lowered collective runs over. Its replica groups are device lists
    (``dense<[[0, 4], ...]>``, devices numbered row-major over the mesh: the axes along which a
    group's devices differ) or, on newer JAX, the mesh's axes by name
    (``#stablehlo.replica_group_mesh_axes<..., axes = [#stablehlo.axis_ref<name = "X">]>``);
    none at all, or groups that cannot be read, mean every axis. A permute's axes are those
    its pairs cross."""
    from jax._src.lib.mlir import ir

    from .hlo import axes_of_groups

    attrs = operation.attributes
    key = "source_target_pairs" if "source_target_pairs" in attrs else "replica_groups"
    if key not in attrs or not mesh_shape:
        return frozenset(axis_names)
    if isinstance(attrs[key], ir.DenseIntElementsAttr):
        rows = np.asarray(ir.DenseIntElementsAttr(attrs[key])).tolist()
        if not rows or any(d < 0 or d >= math.prod(mesh_shape) for row in rows for d in row):
            return frozenset(axis_names)
        return frozenset(axes_of_groups(rows, mesh_shape, axis_names))
    return frozenset(a for a in re.findall(r'axis_ref<name = "(\w+)"', str(attrs[key])) if a in axis_names)


def called_function(operation) -> str | None:
    """The function an operation calls: a func.call's callee, or the decomposition of a
    stablehlo.composite (`jax.lax.composite`: XLA inlines it, so its body is the program's)."""
    from jax._src.lib.mlir import ir

    attribute = {"func.call": "callee", "stablehlo.composite": "decomposition"}.get(operation.name)
    if attribute is None or attribute not in operation.attributes:
        return None
    return ir.FlatSymbolRefAttr(operation.attributes[attribute]).value


def _specs(shard_map, attribute: str) -> list[str]:
    """Each operand's (in_shardings) or result's (out_shardings) dimension shardings of a
    shard_map, as text (``{"X"}, {}``)."""
    if attribute not in shard_map.attributes:
        return []
    return re.findall(r"<@[\w.]+, \[(.*?)\]>", str(shard_map.attributes[attribute]))


def _elements(value) -> float:
    """Elements of a tensor value (infinite for anything else: a token, a tuple)."""
    from jax._src.lib.mlir import ir

    try:
        shape = ir.RankedTensorType(value.type).shape
    except (ValueError, TypeError):
        return float("inf")
    return float(np.prod(shape)) if all(d >= 0 for d in shape) else float("inf")


PRODUCT_OPS = frozenset({"stablehlo.dot_general", "stablehlo.dot", "stablehlo.convolution",
                         "stablehlo.ragged_dot", "chlo.ragged_dot"})


def is_product(value) -> bool:
    """Is `value` a product: a matmul or convolution, or a sum of elementwise products (a
    matmul written as a multiply and a reduce)?"""
    from jax._src.lib.mlir import ir

    if not isinstance(value, ir.OpResult):
        return False
    owner = value.owner.operation
    if owner.name in PRODUCT_OPS:
        return True
    return owner.name == "stablehlo.reduce" and any(
        isinstance(o := v.maybe_downcast(), ir.OpResult) and o.owner.operation.name == "stablehlo.multiply"
        for v in owner.operands)


WORK_OPS = frozenset({"stablehlo.reduce", "stablehlo.reduce_window", "stablehlo.dot_general", "stablehlo.dot",
                      "stablehlo.convolution", "stablehlo.scatter", "stablehlo.select_and_scatter",
                      "stablehlo.fft", "stablehlo.triangular_solve", "stablehlo.cholesky", "stablehlo.while"})
"""The operations that do a part's work: sums and means (a scatter-add, an FFT's zero
frequency, a triangular solve by a matrix of ones are sums too), matmuls, convolutions, and
a loop over split data (a sum written as a loop that adds one slice per step)."""
PLACING_CALLS = ("Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "annotate_device_placement",
                 "MoveToHost", "MoveToDevice", "xla.sdy.", "sdy.")
"""Custom calls that place or reshard data (the partitioner's own): any other custom call on
split data outside a shard_map is work done there (a LAPACK solve, a library kernel)."""
SLICING_OPS = frozenset({"stablehlo.slice", "stablehlo.dynamic_slice", "stablehlo.gather"})
COMBINING_OPS = frozenset({"stablehlo.add", "stablehlo.subtract", "stablehlo.multiply", "stablehlo.divide",
                           "stablehlo.maximum", "stablehlo.minimum", "stablehlo.and", "stablehlo.or",
                           "stablehlo.xor", "stablehlo.power", "stablehlo.remainder", "stablehlo.atan2"})
"""Elementwise arithmetic: work when it combines two pieces sliced out of the data (a sum
written as slices and adds), a tidying when it divides a result by a count or adds a bias."""
_CARRYING_SLICES = frozenset({"stablehlo.reshape", "stablehlo.convert", "stablehlo.transpose",
                              "stablehlo.bitcast_convert", "stablehlo.broadcast_in_dim", "stablehlo.negate",
                              "stablehlo.abs", "stablehlo.select", "stablehlo.pad", "stablehlo.concatenate",
                              "stablehlo.reverse", "stablehlo.copy", "stablehlo.optimization_barrier",
                              "sdy.sharding_constraint"}) | COMBINING_OPS
"""What a piece sliced out of the data stays a piece through: reshapes, casts, negation,
selection, moves of its elements, arithmetic, barriers and sharding constraints."""


def _crops(pad) -> bool:
    """Does a stablehlo.pad cut elements off (a negative edge padding: a slice written as a pad)?"""
    return any(re.search(r"-\d", str(pad.attributes[a])) for a in ("edge_padding_low", "edge_padding_high")
               if a in pad.attributes)


def _from_slices(value, seen: dict) -> bool:
    """Is `value` a piece sliced out of an array (through reshapes, casts and arithmetic on
    such pieces), within its own function?"""
    from jax._src.lib.mlir import ir

    value = value.maybe_downcast()  # as DataFlow reads values
    if not isinstance(value, ir.OpResult):
        return False
    owner = value.owner.operation
    key = id(owner)  # the wrapper is kept in `seen`, so that no other operation can take its id
    if key not in seen:
        verdict = owner.name in SLICING_OPS or (owner.name == "stablehlo.pad" and _crops(owner)) or (
            owner.name in _CARRYING_SLICES and any(_from_slices(o, seen) for o in owner.operands))
        seen[key] = (owner, verdict)
    return seen[key][1]


@functools.lru_cache(maxsize=16)
def work_outside_shard_map(stablehlo_text: str) -> frozenset[str]:
    """The `WORK_OPS` a lowered program runs outside every shard_map (Shardy's manual
    computations; calls followed) on data split over the devices (`DataFlow.from_split_data`):
    the work jax.jit does around the shard_map. Not a tidying of what a shard_map returned
    replicated (summing its [1, 1] psum to a scalar), nor a small matrix built from a
    replicated input. Empty for a program without a Shardy manual computation (a GSPMD lowering
    is not read here)."""
    from jax._src.interpreters import mlir
    from jax._src.lib.mlir import ir

    if "sdy.manual_computation" not in program_ops(stablehlo_text):
        return frozenset()
    outside: set[str] = set()
    with mlir.make_ir_context():
        module = ir.Module.parse(stablehlo_text)
        flow = DataFlow(module)
        entries = [f for f in flow.functions.values() if flow.is_entry(f)]
        visited: set[tuple[str, bool]] = set()
        sliced: dict = {}

        def visit(op, inside: bool) -> None:
            inside = inside or op.name == "sdy.manual_computation"
            if not inside and op.name in WORK_OPS and op.name not in outside \
                    and flow.from_split_data(list(op.operands)):
                outside.add(op.name)
            elif not inside and op.name == "stablehlo.custom_call" \
                    and not (target := ir.StringAttr(op.attributes["call_target_name"]).value).startswith(PLACING_CALLS) \
                    and flow.from_split_data(list(op.operands)):
                outside.add(f"custom call {target}")
            elif not inside and op.name in COMBINING_OPS and len(op.operands) == 2 \
                    and all(_from_slices(v, sliced) for v in op.operands) and flow.from_split_data(list(op.operands)):
                outside.add(op.name.removeprefix("stablehlo.") + " of slices")
            if (callee := called_function(op)) is not None:
                if callee in flow.functions and (callee, inside) not in visited:
                    visited.add((callee, inside))
                    visit(flow.functions[callee], inside)
            for region in op.regions:
                for block in region.blocks:
                    for child in block.operations:
                        visit(child.operation, inside)

        for function in entries:
            visit(function, False)
    return frozenset(outside)


def arg_attrs(function) -> list[str]:
    """Each argument's attributes of a func.func, as text."""
    from jax._src.lib.mlir import ir

    if "arg_attrs" not in function.attributes:
        return []
    return [str(a) for a in ir.ArrayAttr(function.attributes["arg_attrs"])]


def _is_sharded(attrs: str) -> bool:
    """Does an argument's sharding (``#sdy.sharding<@mesh, [{"X"}, {}]>``) split a dimension?"""
    match = re.search(r"sdy\.sharding<[^\[]*\[(.*?)\]>", attrs)
    return bool(match and re.search(r'"\w+"', match.group(1)))


def uses_shard_map(stablehlo_text: str) -> bool:
    """Does a lowered (StableHLO) program contain a shard_map region?"""
    return bool(program_ops(stablehlo_text) & SHARD_MAP_OPS)


def style_shows(mesh: tuple[int, ...]) -> bool:
    """Can a program show on `mesh` whether it has a shard_map, and the collective a part must
    write in it? JAX inlines a shard_map whose manual axes all have one device (nothing to map
    over), collectives and all: on a 1x8 mesh one manual over X only (`axis_names={'X'}`, Y
    left to the partitioner) leaves no trace. So only where every axis has two devices or more."""
    return min(mesh) > 1


def style_on_every_mesh(part: Part, cases: list[CaseResult]) -> list[CaseResult]:
    """The cases of `part` with its style verdict carried to every mesh: the style is a property
    of the code, so a program that shows on one mesh that it lacks its shard_map (or the
    collective written in it) lacks it on the meshes that cannot show it (`style_shows`)."""
    if all(r.judged_everywhere for r in part.style_rules):
        return cases
    shown = [(p, c.case.mesh) for c in cases if style_shows(c.case.mesh)
             for p in c.problems if p.startswith(f"{part.name} must ")]
    if not shown:
        return cases
    problem, mesh = shown[0]
    carried = f"{problem} (seen on the {'x'.join(map(str, mesh))} mesh: a mesh with a one-device axis cannot show it)"
    return [c if style_shows(c.case.mesh) or problem in c.problems
            else dataclasses.replace(c, rule_ok=False, problems=c.problems + [carried]) for c in cases]


# --- a case's inputs and verdict (no JAX: the graders' parent makes inputs and reads verdicts) ---


def make_inputs(part: Part, case: Case, seed: int) -> list[np.ndarray]:
    """Random inputs: floats with distinct values in every shard (so a wrong shard shows),
    integers uniform in [0, high). A part with its own generator (`Part.inputs`) uses it.
    A `Tree` argument gets a tuple of arrays."""
    rng = np.random.default_rng(seed)
    if part.inputs is not None:
        return list(part.inputs(case, rng))

    def one(_, arg):
        shape = arg.shape(case)
        if np.issubdtype(np.dtype(arg.dtype), np.integer):
            return rng.integers(0, case.all_sizes[arg.high], size=shape).astype(arg.dtype)
        base = rng.standard_normal(shape) * 3.0
        if len(shape) >= 1:  # a per-row offset makes every row's mean different
            base += np.arange(shape[0]).reshape((-1,) + (1,) * (len(shape) - 1))
        return base.astype(arg.dtype)

    return [map_args(one, arg, _placeholder(arg)) for arg in part.args]


def case_inputs(assignment: Assignment, part: Part, case: Case, seed: int) -> list:
    """A case's input arrays, by the assignment's generator (`Assignment.inputs`)."""
    return (assignment.inputs or make_inputs)(part, case, seed)


def as_float64(value):
    """An input as float64 NumPy (tuples for `Tree` arguments), for the reference."""
    if isinstance(value, tuple):
        return tuple(as_float64(v) for v in value)
    return np.asarray(value).astype(np.float64)


_CONSTANT_ANSWERS: dict[tuple[str, str, str], bool] = {}


def answer_is_constant(assignment: Assignment, part: Part, case: Case) -> bool:
    """Is `case`'s right answer the same whatever its inputs hold? (roll_diff with a shift that
    is a whole number of shards' rows: all zeros; a normalization over one row: all ones.) A
    function that ignores its inputs is right there, so being right there shows nothing alone.
    Two independent draws of the inputs, compared."""
    key = (assignment.name, part.name, case.label)
    if key not in _CONSTANT_ANSWERS:
        answers = [part.reference(*[as_float64(a) for a in case_inputs(assignment, part, case, seed)],
                                  mesh=case.mesh, **case.statics) for seed in (1, 2)]
        first, second = ([np.asarray(x) for x in _leaves(answer)] for answer in answers)
        _CONSTANT_ANSWERS[key] = all(a.shape == b.shape and np.allclose(a, b, rtol=1e-9, atol=1e-12)
                                     for a, b in zip(first, second))
    return _CONSTANT_ANSWERS[key]


def _leaves(value) -> list:
    return [leaf for item in value for leaf in _leaves(item)] if isinstance(value, (tuple, list)) else [value]


NEEDS_AN_INPUT_CASE = ("values right, but this case's answer is the same whatever the inputs hold, so a function "
                       "that ignores its inputs is right here too: it counts once your function is right on a case "
                       "whose answer depends on its inputs")


def counted_where_answers_depend(cases: list[CaseResult], constant: list[bool]) -> list[CaseResult]:
    """The cases with right values on cases of constant answer (`answer_is_constant`) counted
    only if the values are right on some case whose answer depends on the inputs: a function
    that returns zeros must not earn roll_diff's shift-0 cases."""
    if all(constant) or any(c.values_ok for c, fixed in zip(cases, constant) if not fixed):
        return cases
    return [dataclasses.replace(c, values_ok=False, problems=[NEEDS_AN_INPUT_CASE] + c.problems)
            if fixed and c.values_ok else c for c, fixed in zip(cases, constant)]


def _placeholder(arg):
    """A value with `arg`'s nesting, for `map_args` to walk."""
    return tuple(_placeholder(item) for item in arg.items) if isinstance(arg, Tree) else None


@dataclasses.dataclass
class CaseResult:
    """The verdict on one case (one mesh, one set of sizes and static arguments)."""

    case: Case
    values_ok: bool
    """Shape, dtype, sharding and values all match the contract."""
    rule_ok: bool
    """The communication rule and the required style (jit or shard_map) hold."""
    problems: list[str]
    """What went wrong, in words a student can act on (empty when all is well)."""
    analysis: ProgramAnalysis | None = None
    """The compiled program's communication, when it compiled."""
    ran: bool = True
    """The program compiled and ran to the end, so the verdict depends on nothing but the
    program, the case and its inputs (False: it failed to compile or raised when run, or the
    profiler could not count how often its collectives ran, all of which can depend on the
    process it ran in; such a verdict is never cached)."""

    @property
    def passed(self) -> bool:
        return self.values_ok and self.rule_ok

    @classmethod
    def failed(cls, case: Case, problem: str) -> "CaseResult":
        return cls(case, False, False, [problem], ran=False)
