"""The lowered program: a graded function's StableHLO, as jax.jit lowers it before XLA partitions
and optimizes it, read for what the student wrote.

What the compiled program communicates and holds is `assignments.hlo`'s; what only the lowered
one shows is read here, from one `LoweredProgram` per program (`lowered_program(text)`: parsed
once, its data flow built once): its operations (`ops`: is there a shard_map), its data flow
from the arguments (`DataFlow`: what a value is computed from, what it carries), the work jax.jit
does outside a shard_map (`work_outside_shard_map`), each collective written in it with the
arguments it carries (`written_collectives`), and what each shard_map takes (`shard_map_inputs`).
The style rules read these (`assignments.style_rules`, through `Program.lowered`); so does the
judge (`ops`). MLIR's Python bindings come with jaxlib, imported only when a program is read.
"""
from __future__ import annotations

import functools
import math
import re
from typing import NamedTuple

import numpy as np

from .contract import MESH_AXES

SHARD_MAP_OPS = frozenset({"sdy.manual_computation", "custom_call:SPMDFullToShardShape",
                           "custom_call:SPMDShardToFullShape"})
"""How a shard_map shows in a lowered program: Shardy's manual computation, or GSPMD's
conversions into and out of the manual region."""


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


COLLECTIVE_OPS = frozenset("stablehlo." + op for op in ("all_reduce", "all_gather", "all_to_all", "collective_permute",
                                                          "reduce_scatter", "collective_broadcast"))
"""The collectives of a lowered (StableHLO) program."""


class WrittenCollective(NamedTuple):
    op: str
    """``all_gather``, ``all_to_all``, ..."""
    axes: frozenset[str]
    sources: tuple[frozenset[int], ...]
    """Each operand's sources (`DataFlow.sources`)."""
    carried: tuple[frozenset[int], ...]
    """The arguments each operand carries as they are, not as results of a product
    (`DataFlow.carried_sources`)."""
    whole_sources: tuple[frozenset[int], ...]
    """`sources`, not through values of fewer elements than `LoweredProgram.written_collectives`'
    `narrower_than` (the same when it is 0)."""
    whole_carried: tuple[frozenset[int], ...]
    """`carried`, likewise."""


class ShardMapInput(NamedTuple):
    carried: frozenset[int]
    """The arguments this input carries as they are (`DataFlow.carried_sources`)."""
    as_it_arrives: bool
    """Is it an argument itself, through reshapes, transposes, casts, calls and sharding
    constraints only (nothing jax.jit computes from it outside the shard_map)?"""
    split: frozenset[str]
    """The mesh axes its in_specs split it over."""
    left_whole: frozenset[str]
    """Where it keeps its argument's dimensions (no reshape or transpose between them): the axes
    the argument's own sharding splits a dimension over that its in_specs leave whole on that
    dimension (jax.jit gathers the argument over those axes at the boundary)."""


SAME_DIMENSIONS_OPS = frozenset({"stablehlo.convert", "stablehlo.bitcast_convert", "func.call", "stablehlo.composite",
                                 "sdy.sharding_constraint", "stablehlo.optimization_barrier"})
"""What leaves an argument as it is, dimension for dimension: casts, calls, a reshard."""
PASSING_OPS = SAME_DIMENSIONS_OPS | {"stablehlo.reshape", "stablehlo.transpose"}
"""What leaves an argument's values as they are: those, and reshapes and transposes."""


class LoweredProgram:
    """One lowered (StableHLO) program, parsed once, with what the style rules and the judge read
    of it: its operations (`ops`, `uses_shard_map`), the work jax.jit does around its shard_map
    (`work_outside_shard_map`), each collective written in it with the arguments it carries
    (`written_collectives`), what each shard_map takes (`shard_map_inputs`), and the data flow
    these read (`flow`, built once, on first use, and shared: a program's collectives and its
    shard_map's inputs are computed from mostly the same values). Each is found once; get one
    with `lowered_program(text)`, which keeps the last few, since a judge reads a program before
    compiling it and again for each of its cases (problem2's routings share a program).
    The MLIR context the text was parsed in (`_context`) is kept with the module, and entered
    to read it."""

    def __init__(self, text: str):
        from jax._src.lib.mlir import ir

        self.text = text
        self.context = _context()
        with self.context:
            self.module = ir.Module.parse(text)
        self._collectives: dict[tuple, list[WrittenCollective]] = {}

    @functools.cached_property
    def flow(self) -> DataFlow:
        """The program's data flow from its arguments (`DataFlow`), with its memos."""
        with self.context:
            return DataFlow(self.module)

    @functools.cached_property
    def ops(self) -> frozenset[str]:
        """The program's operation names, with each custom call as ``custom_call:<target>``.
        Locations, names and scopes play no part, so a `jax.named_scope("manual_computation")`
        is not mistaken for a shard_map."""
        from jax._src.lib.mlir import ir

        names: set[str] = set()

        def visit(op):
            names.add(op.name)
            if op.name == "stablehlo.custom_call" and "call_target_name" in op.attributes:
                names.add("custom_call:" + ir.StringAttr(op.attributes["call_target_name"]).value)
            return ir.WalkResult.ADVANCE

        with self.context:
            self.module.operation.walk(visit)
        return frozenset(names)

    @property
    def uses_shard_map(self) -> bool:
        """Does the program contain a shard_map region (`SHARD_MAP_OPS`)?"""
        return bool(self.ops & SHARD_MAP_OPS)

    @functools.cached_property
    def work_outside_shard_map(self) -> frozenset[str]:
        """The `WORK_OPS` the program runs outside every shard_map (Shardy's manual
        computations; calls followed) on data split over the devices (`DataFlow.from_split_data`):
        the work jax.jit does around the shard_map. Not a tidying of what a shard_map returned
        replicated (summing its [1, 1] psum to a scalar), nor a small matrix built from a
        replicated input. Empty for a program without a Shardy manual computation (a GSPMD
        lowering is not read here)."""
        from jax._src.lib.mlir import ir

        if "sdy.manual_computation" not in self.ops:
            return frozenset()
        outside: set[str] = set()
        flow = self.flow
        with self.context:
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

    def written_collectives(self, mesh_shape: tuple[int, ...], narrower_than: int = 0) -> list[WrittenCollective]:
        """Each collective of the program (``all_gather``, ...), found once per mesh and
        `narrower_than`. Its replica groups are device lists (``dense<[[0, 4], ...]>``) or, on
        newer JAX, the mesh's axes by name (``#stablehlo.replica_group_mesh_axes<..., axes =
        [#stablehlo.axis_ref<name = "X">]>``); none at all means every device; a permute's axes
        are those its pairs cross.
        Sources: the positions of the program's arguments an operand is computed from
        (`DataFlow`; a correct answer uses every argument, so the exported program keeps them
        all, in order); `whole_sources` and `whole_carried`, not through values of fewer
        elements than `narrower_than` (one row of an argument)."""
        key = (tuple(mesh_shape), narrower_than)
        if key not in self._collectives:
            self._collectives[key] = self._find_collectives(tuple(mesh_shape), narrower_than)
        return self._collectives[key]

    def _find_collectives(self, mesh_shape: tuple[int, ...], narrower_than: int) -> list[WrittenCollective]:
        from jax._src.lib.mlir import ir

        found: list[WrittenCollective] = []
        flow = self.flow

        def visit(operation):
            operation = operation.operation
            if operation.name not in COLLECTIVE_OPS:
                return ir.WalkResult.ADVANCE
            axes = collective_axes(operation, mesh_shape, MESH_AXES)
            sources = tuple(flow.sources([v]) for v in operation.operands)
            carried = tuple(flow.carried_sources([v]) for v in operation.operands)
            if narrower_than:
                whole = (tuple(flow.sources([v], narrower_than) for v in operation.operands),
                         tuple(flow.carried_sources([v], narrower_than) for v in operation.operands))
            else:
                whole = (sources, carried)
            found.append(WrittenCollective(operation.name.removeprefix("stablehlo."), frozenset(axes),
                                           sources, carried, *whole))
            return ir.WalkResult.ADVANCE

        with self.context:
            self.module.operation.walk(visit)
        return found

    @functools.cached_property
    def shard_map_inputs(self) -> list[ShardMapInput]:
        """Each input of each outermost shard_map (Shardy's manual computation) of the program:
        one nested in another (or in a function a shard_map calls) takes what the outer one's
        body computed on its own devices, where jax.jit moves nothing."""
        from jax._src.lib.mlir import ir

        def dims(text: str) -> list[frozenset[str]]:
            return [frozenset(re.findall(r'"(\w+)"', d)) for d in re.findall(r"\{[^{}]*\}", text)]

        found = []
        flow = self.flow
        with self.context:
            entry = {n: dims(sharding.group(1)) for f in flow.functions.values() if flow.is_entry(f)
                     for n, attrs in enumerate(arg_attrs(f))
                     if (sharding := re.search(r"sdy\.sharding<[^\[]*\[(.*?)\]", attrs))}
            inside: set[str] = set()  # the functions a shard_map's body calls, directly or not

            def calls(operation):
                operation = operation.operation
                if (callee := called_function(operation)) is not None:
                    if callee in flow.functions and callee not in inside:
                        inside.add(callee)
                        flow.functions[callee].walk(calls)
                return ir.WalkResult.ADVANCE

            def bodies(operation):
                if operation.operation.name == "sdy.manual_computation":
                    operation.operation.walk(calls)
                return ir.WalkResult.ADVANCE

            self.module.operation.walk(bodies)

            def visit(operation):
                operation = operation.operation
                if operation.name != "sdy.manual_computation":
                    return ir.WalkResult.ADVANCE
                specs = re.findall(r"<@[\w.]+, \[(.*?)\]", str(operation.attributes["in_shardings"])) \
                    if "in_shardings" in operation.attributes else []
                for k, value in enumerate(operation.operands):
                    spec = dims(specs[k]) if k < len(specs) else []
                    carried = flow.carried_sources([value])
                    same = flow.only_through([value], SAME_DIMENSIONS_OPS)
                    left_whole = frozenset(axis for n in (carried if same else ()) for d, axes in enumerate(entry.get(n, ()))
                                           for axis in axes if d >= len(spec) or axis not in spec[d])
                    found.append(ShardMapInput(carried, flow.only_through([value], PASSING_OPS),
                                               frozenset().union(*spec), left_whole))
                return ir.WalkResult.SKIP  # a shard_map inside it is its body's business

            for name, function in flow.functions.items():
                if name not in inside:
                    function.walk(visit, ir.WalkOrder.PRE_ORDER)
        return found


_CONTEXT: list = [None, 0]
"""The MLIR context programs are parsed in, and how many have been."""
PROGRAMS_PER_CONTEXT = 10
"""How many programs one MLIR context serves (newer JAX reuses its own as many times)."""


def _context():
    """The MLIR context to parse the next program in: one serves `PROGRAMS_PER_CONTEXT`
    programs, so that a judge pays for loading MLIR's dialects into a new one (a few ms, more
    than parsing a program) once in ten programs, while what a context interns (types,
    attributes, locations) stays bounded. Each program keeps its context alive."""
    from jax._src.interpreters import mlir

    context, parsed = _CONTEXT
    if context is None or parsed >= PROGRAMS_PER_CONTEXT:
        context, parsed = mlir.make_ir_context(), 0
    _CONTEXT[:] = [context, parsed + 1]
    return context


@functools.lru_cache(maxsize=8)
def lowered_program(text: str) -> LoweredProgram:
    """The `LoweredProgram` of a lowered (StableHLO) program's text, parsed once: the last few
    are kept, so that a judge, which reads a program's operations before compiling it and runs
    the style rules on each of its cases, parses it once."""
    return LoweredProgram(text)
