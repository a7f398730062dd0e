"""Assignment problem2: a mixture-of-experts layer, on one device, then sharded three ways.

The book's Problem 2 (How To Scale Your Model, Part 10, "Worked Problems",
https://jax-ml.github.io/scaling-book/jax-stuff/): ``Out[i] = A[i] @ W[B[i]]`` where
``B[i]`` names the expert (one of E matrices) that token i goes to; then top-k routing,
``Out[i] = mean_j A[i] @ W[B[i, j]]``. The rules are about memory as much as about
communication: no version may build the dense ``W[B]`` gather (an [S, D, F] value), and the
all-to-all versions may not hold anything as large as the global activations on one device.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, ClassVar

import numpy as np

from ..contract import Arg, Assignment, Case, Part, WrittenPart, make_inputs
from ..hlo import bytes_sent
from ..rules import AllOf, AnyCommunication, OnlyWhen, Rule, _observed
from ..style_rules import JitOnly, KeepsOnAxis, UsesShardMap, WritesCollective

F32 = 4

W = Arg("W", ("E", "D", "F"), ("X", None, "Y"))
A = Arg("A", ("S", "D"), ("X", "Y"))
B = Arg("B", ("S",), ("X",), dtype="int32", high="E")
B_TOPK = Arg("B", ("S", "k"), ("X", None), dtype="int32", high="E")
OUT = Arg("out", ("S", "F"), ("X", "Y"))
ARGUMENTS = (W.name, A.name, B.name)
"""What every part takes, in order: messages name what a value is computed from by these."""
EXPERTS = ARGUMENTS.index(W.name)

# moe_local runs on one device: a 1x1 mesh, every argument whole.
W_ONE = Arg("W", ("E", "D", "F"), (None, None, None))
A_ONE = Arg("A", ("S", "D"), (None, None))
B_ONE = Arg("B", ("S",), (None,), dtype="int32", high="E")
OUT_ONE = Arg("out", ("S", "F"), (None, None))

# The book's latest text (Problem 2, "Worked Problems"): W[E_X, D, F] and A[S_X, D], so every
# device holds whole rows of its tokens and whole matrices of its experts.
W_X = Arg("W", ("E", "D", "F"), ("X", None, None))
A_X = Arg("A", ("S", "D"), ("X", None))
OUT_X = Arg("out", ("S", "F"), ("X", None))

# Visible sizes sit where a fragile design breaks a rule, so a student meets it before the
# graders do: E >= D, so a padded buffer's [E, S, F] product (E/nX of them per device) is as
# large as the dense gather; E/nX = 4 on 2x4, so a padded round of the old chunk (S/nX) // 4,
# E/nX x nX*chunk rows, holds S*D; k = nX, so k copies of the tokens hold S*D. E stays below
# F (F/nY), where XLA:CPU's copy for jax.lax.ragged_dot stays below the share.
VISIBLE_LOCAL = Case(mesh=(1, 1), sizes={"S": 16, "D": 6, "F": 12, "E": 8})
VISIBLE = Case(mesh=(2, 4), sizes={"S": 64, "D": 8, "F": 36, "E": 8})
VISIBLE_X = Case(mesh=(2, 4), sizes={"S": 64, "D": 8, "F": 10, "E": 8})
VISIBLE_TOPK = Case(mesh=(2, 4), sizes={"S": 64, "D": 8, "F": 36, "E": 8, "k": 2})


def moe(W, A, B, *, mesh=None):
    """Out[i] = mean over j of A[i] @ W[B[i, j]] (B of shape [S] means k = 1), float64."""
    B = np.asarray(B).astype(np.int64)
    if B.ndim == 1:
        B = B[:, None]
    out = np.zeros((A.shape[0], W.shape[2]))
    for j in range(B.shape[1]):
        for e in range(W.shape[0]):
            rows = B[:, j] == e
            out[rows] += A[rows] @ W[e]
    return out / B.shape[1]


def per_device_f(s) -> int:
    """F/nY: the result columns a device holds when W is at P('X', None, 'Y')."""
    return s["F"] // s["nY"]


def whole_f(s) -> int:
    """F: the result columns a device holds with the book's latest shardings."""
    return s["F"]


CHUNK_TEXT = "(S/nX) // (2*max(nX, E/nX))"


def safe_chunk(s) -> int:
    """The notebook's chunk (pairs per destination per round), `CHUNK_TEXT`: at most half of
    S/nX/nX, the fewest pairs any device sends its busiest row, so the last round's padding
    costs less than half of what the busiest pair needs (the 2x byte bound, ids included);
    and at most S/nX/(2*E/nX), so a round's padded buffer or ragged_dot copy, E/nX x nX*chunk
    rows, stays at most S/2."""
    return max(1, s["S"] // s["nX"] // (2 * max(s["nX"], s["E"] // s["nX"])))


ONE_EXPERT_AT_A_TIME = ("multiply one expert at a time instead (a jax.lax.scan over the experts: each "
                        "step multiplies the rows by one expert's matrix and keeps those routed to it), "
                        "so no value is larger than [rows, F]")


def _grouping_advice(s, where: str) -> str:
    """What to do about a padded buffer or a ragged_dot copy that is too large (lower case)."""
    if where == "rounds":
        return (f"use a smaller chunk (at most {CHUNK_TEXT} = {safe_chunk(s)} pairs "
                f"per destination keeps a round's E/nX x nX*chunk rows at most S/2), or "
                f"{ONE_EXPERT_AT_A_TIME}")
    return ONE_EXPERT_AT_A_TIME


def explain_value(v, s: dict, result: Callable[[dict], int], where: str) -> str:
    """What a too-large value most likely is, read from its shape and the case's sizes, and
    what to do instead. `where`: "local" (moe_local), "gather" (every token gathered) or
    "rounds" (the all-to-all versions). Shapes that fit no known fault get a plain advice.
    Several all_to_alls in flight at once (`assignments.hlo._rounds_in_pieces`) are said to be."""
    text = _explain_shape(v, s, result, where)
    if v is not None and v.opcode == "all-to-all" and "+" in v.name:
        return (f"{v.name.count('+') + 1} all_to_alls in flight at once, none waiting for another, hold "
                f"{v.shape} together: {text[0].lower()}{text[1:]}")
    return text


def _explain_shape(v, s: dict, result: Callable[[dict], int], where: str) -> str:
    G, R, D, S, nX = s["E"] // s["nX"], result(s), s["D"], s["S"], s["nX"]
    T, k = S // nX, s.get("k", 1)
    dims = [d for d in v.shape.dims if d != 1] if v is not None else []
    if len(dims) == 3 and dims[1:] == [D, R]:
        return (f"{v.shape} is the dense W[B] gather: one D x F matrix for each of {dims[0]} tokens. "
                f"Group the tokens by expert and multiply each group by its expert's matrix once")
    if len(dims) == 2 and G >= 2 and dims[1] == G * D:
        return (f"XLA:CPU made {v.shape}, not a line of your code: it runs jax.lax.ragged_dot as one dense "
                f"matmul over a masked copy of its {dims[0]} rows for each of the {G} expert groups "
                f"([rows, groups*D]), as large as a padded buffer (a TPU or GPU runs ragged_dot without "
                f"this copy). On this CPU, {_grouping_advice(s, where)}")
    sent = v is not None and v.opcode == "all-to-all"  # what a round sends: never an expert's buffer
    if len(dims) == 3 and dims[0] == G and G >= 2 and not sent:
        f = "F" if result is whole_f else "F/nY"  # a device's result columns (the _x parts: all of F)
        sizes = {"local": "E*S*D and E*S*F elements, below S*D*F only while E < D and E < F",
                 "gather": f"E/nX*S*D and E/nX*S*{f} elements, below the limit only while E < D "
                           f"and E < {f}",
                 "rounds": f"{G} x {dims[1]} = {G * dims[1]} rows, against S = {S}"}[where]
        advice = _grouping_advice(s, where)
        return (f"{v.shape} is a padded buffer or its product: {dims[1]} slots for each of {G} experts "
                f"({sizes}). {advice[0].upper()}{advice[1:]}")
    # Rows of results (computed from the experts) or of tokens: read from what the value is
    # computed from, or, for a value whose sources are not known, from its width.
    results = (EXPERTS in v.sources) if v is not None and v.sources is not None else bool(dims) and dims[-1] == R != D
    if where == "rounds" and k >= 2 and dims in ([T * k, D], [T, k, D], [T * k, R], [T, k, R]):
        if results:
            return (f"{v.shape} holds a result for each of your {T} tokens' {k} choices, kept until the rounds "
                    f"are over: {T * k} rows reach S once k >= nX. Add each round's results into the output "
                    f"inside the loop (out.at[token].add), for that round's pairs only")
        return (f"{v.shape} is {k} copies of your {T} tokens, one per (token, expert) pair, made before "
                f"the rounds: {T * k} rows of D reach S*D once k >= nX. Pick each round's tokens inside "
                f"the loop, by index, for that round's pairs only")
    if where == "rounds" and len(dims) == 3 and dims[0] == nX and dims[2] in (D, R):
        return (f"{v.shape} is one round's buffer: {dims[1]} pairs for each of the {nX} rows, room for "
                f"{nX * dims[1]} tokens, as many as all S = {S}. Send tokens in fixed-size chunks of at "
                f"most {CHUNK_TEXT} = {safe_chunk(s)} pairs per destination, as many rounds as the "
                f"busiest pair of rows needs (jax.lax.all_to_all inside jax.lax.while_loop)")
    if where == "rounds" and len(dims) == 2 and dims[1] in (D, R) and dims[0] >= S:
        rows = "results" if results else "tokens"
        every = "every token's result" if results else "every token"
        return (f"{v.shape} holds {dims[0]} rows of {rows}, as many as all S = {S} tokens have: {every} on "
                f"one device, or a round with room for all of them. Send tokens in "
                f"fixed-size chunks of at most {CHUNK_TEXT} = {safe_chunk(s)} pairs per destination, as many "
                f"rounds as the busiest pair of rows needs (jax.lax.all_to_all inside jax.lax.while_loop), "
                f"and add each round's results into the output as they come back")
    if where == "rounds":
        return ("Send tokens in fixed-size chunks, round after round (jax.lax.all_to_all inside "
                "jax.lax.while_loop), so that no buffer holds all tokens (an [E, S, D] buffer, or one "
                "padded round sized for every local token)")
    return "Group the tokens by expert and multiply each group by its expert's matrix once"


@dataclasses.dataclass(frozen=True)
class SmallValues(Rule):
    """No activation (a value computed outside fusions from W or A, `Value.bookkeeping`: values
    computed from the routing B alone never count) with `limit(sizes)` elements or more per
    device; the message describes each value found by its shape and the arguments it is
    computed from (`ARGUMENTS`), and says what it most likely is (`explain_value`). With
    `temporary_memory` (elements, `TEMPORARY_TEXT`), no more float32 bytes of temporary memory
    than that (`ProgramAnalysis.temp_bytes`): small values live together are a large one in
    pieces."""

    code: ClassVar[str] = "M002"
    title: ClassVar[str] = "no-dense-routing-buffer"
    checks: ClassVar[str] = "no value (nor the temporary memory) is as large as the dense buffer the routing avoids"
    rationale: ClassVar[str] = (
        "Routing tokens to experts exists to avoid the dense computation: a value (or temporary memory) "
        "as large as an [S, D, F] array, or a padded buffer sized for every token, costs the memory the "
        "routing saves. Values computed from the routing alone (ids, counts, masks) are bookkeeping and "
        "never count.")

    limits_memory: ClassVar[bool] = True
    limit: Callable[[dict], int]
    what: str
    result: Callable[[dict], int] = per_device_f
    where: str = "gather"
    """"local", "gather" or "rounds": which advice fits the design the part asks for."""
    temporary_memory: Callable[[dict], int] | None = None

    def describe(self) -> str:
        return f"no value as large as {self.what}" + (", nor more temporary memory than it or a padded "
                                                      "grouping needs" if self.temporary_memory else "")

    def violations(self, analysis, case, inputs=()) -> list[str]:
        s = case.all_sizes
        limit = self.limit(s)
        big = analysis.values_at_least(limit)
        held = analysis.temp_bytes if self.temporary_memory and analysis.temp_bytes is not None else 0
        allowed = self.temporary_memory(s) * F32 if self.temporary_memory else 0
        if not big and held and held >= allowed:
            return [f"the program holds {held:,} bytes of temporary memory at once; allowed: less than "
                    f"{allowed:,} bytes ({TEMPORARY_TEXT}). No one value is that large, so many smaller ones "
                    f"live together: the dense array in pieces (one D x F copy of W per token, say). "
                    f"{explain_value(None, s, self.result, self.where)}."]
        if not big:
            return []
        seen = ", ".join(v.describe(ARGUMENTS) for v in big[:3])
        why = []  # one explanation per kind of value, largest first
        for v in big[:3]:
            text = explain_value(v, s, self.result, self.where)
            if text.split(" ", 1)[1] not in (w.split(" ", 1)[1] for w in why):  # the same, another shape
                why.append(text)
        return [f"the program computes {seen}; allowed: no value with {limit:,} or more elements "
                f"({self.what}). {'. '.join(why[:2])}."]


def _dense_share(s):
    """Elements of one device's share of an [S, D, F] array."""
    return s["S"] * s["D"] * s["F"] // (s["nX"] * s["nY"])


SHARE_TEXT = "a device's share of an [S, D, F] array, S*D*F/(nX*nY) elements"
def _dense_or_padded_grouping(s):
    """Float32 elements of temporary memory moe_local may hold: the dense [S, D, F] array's, or,
    where E is larger than D or F, a padded grouping's (every token in each expert's buffer,
    E*S*D, its product, E*S*F, and a copy of W, E*D*F): XLA:CPU's jax.lax.ragged_dot is one."""
    return max(s["S"] * s["D"] * s["F"], s["E"] * s["S"] * (s["D"] + s["F"]) + s["E"] * s["D"] * s["F"])


TEMPORARY_TEXT = ("the float32 bytes of the dense [S, D, F] array, S*D*F elements, or where E exceeds D or F "
                  "of a padded grouping, E*S*D + E*S*F + E*D*F, whichever is more")
NO_DENSE_LOCAL = SmallValues(_dense_share, SHARE_TEXT, where="local", temporary_memory=_dense_or_padded_grouping)
NO_DENSE_GATHER = SmallValues(_dense_share, SHARE_TEXT, where="gather")
NO_DENSE_ROUNDS = SmallValues(_dense_share, SHARE_TEXT, where="rounds")


def _activations(result):
    return OnlyWhen(lambda s: s["nX"] >= 2,
                    SmallValues(lambda s: s["S"] * s["D"], "the global [S, D] activations, S*D elements",
                                result=result, where="rounds"),
                    "on meshes with nX >= 2")


NOT_ALL_ACTIVATIONS = _activations(per_device_f)


@dataclasses.dataclass(frozen=True)
class NoGatherOverX(Rule):
    """No all-gather over X: what it gathers is named from its operand (tokens, results, or
    integer ids), since each has its own fix."""

    code: ClassVar[str] = "C009"
    title: ClassVar[str] = "no-gather-over-x"
    checks: ClassVar[str] = "no all-gather runs over X"
    rationale: ClassVar[str] = (
        "The all-to-all design sends each token only to its expert's row; an all-gather over X sends "
        "every token to every row, nX times the bytes the routing needs.")

    result: Callable[[dict], int] = per_device_f

    def describe(self) -> str:
        return "no all-gather over X"

    def violations(self, analysis, case, inputs=()) -> list[str]:
        s = case.all_sizes
        gathers = [c for c in analysis.of_kind("all-gather") if "X" in c.axes and c.operands]
        floats = [c for c in gathers if c.operands[0].dtype.startswith(("f", "bf", "c"))]
        problems = []
        for dtype_kind, group in (("float", floats), ("int", [c for c in gathers if c not in floats])):
            if group:
                problems.append(f"communication observed: {_observed(group)}; allowed: no all-gather over X. "
                                f"{self._why(dtype_kind, group, s)}")
        return problems

    def _why(self, dtype_kind, group, s) -> str:
        if dtype_kind == "int":
            return self._why_integers(group, s)
        last = {c.operands[0].dims[-1] for c in group if c.operands[0].dims}
        R, D = self.result(s), s["D"]
        if last == {R} and R != D:
            return ("That gathers results (rows of F) to every row: bring each result home with "
                    "jax.lax.all_to_all, back the way its token came, so each row receives only its own")
        if last == {D} and R != D:
            return ("Tokens should travel only to the devices that own their experts "
                    "(jax.lax.all_to_all over X), not be gathered everywhere")
        return ("Tokens and their results should travel only between a token's row and its expert's "
                "row (jax.lax.all_to_all over X), not be gathered everywhere")

    @staticmethod
    def _why_integers(group, s) -> str:
        """What gathered integers are, read from what they are computed from and their size:
        activations in another type (computed from A or W), one number per device (a count: a
        loop bound, which pmax agrees on), or routing data (expert ids, counts, a mask)."""
        sources = {i for c in group if c.sources is not None for i in c.sources}
        activations = [name for i, name in enumerate(ARGUMENTS) if i in sources and name != B.name]
        if activations:
            return (f"Those values are computed from {' and '.join(activations)}: activations in another "
                    f"type. Tokens should travel only to the devices that own their experts "
                    f"(jax.lax.all_to_all over X), not be gathered everywhere")
        per_device = max(c.operands[0].elements for c in group)
        routing = f" computed from {B.name}" if sources else ""
        if per_device == 1:
            return (f"That gathers one integer per device{routing} (a count?) to every row. To agree on how "
                    f"many rounds to run, take the most over X with jax.lax.pmax (an all-reduce)")
        return (f"That gathers routing data{routing} ({per_device} integers per device: expert ids, counts or "
                f"a mask) to every row. Send each token's expert id with the token, in an all_to_all of its "
                f"own, and agree on how many rounds to run with jax.lax.pmax")


BYTES_FACTOR = 2
"""How many times the bytes of a perfectly routed all-to-all the tokens may cost (the rounding
of fixed-size chunks costs up to about this much; sending every token to every row, nX times)."""


@dataclasses.dataclass(frozen=True)
class TokensByAllToAll(Rule):
    """On meshes with nX >= 2: the tokens travel by all-to-all over X (an all-reduce or an
    all-gather that broadcasts them does not count), the all-to-alls carry at least the tokens
    the case's routing sends to other rows (`least`), floats cross X otherwise only in amounts
    smaller than one expert's [D, result] slice (a psum of zero-padded experts, or a ring of
    permutes, would bring the experts to the tokens), and the collectives over X move
    at most `BYTES_FACTOR` times what an all-to-all routing each token only to its expert's row
    needs on the case's routing (read from the case's B).

    That need, per device: a fixed-size all-to-all sends one block to every row (its own
    included) per round, so over a run every block must hold the most (token, expert) pairs
    one row sends to one row, m; each pair carries its token there (D floats) and its result
    back (`result` floats: a device's share of F). What is counted: every collective over X,
    its whole operand per device (the device's own block and any ids included), times the
    number of times it runs."""

    code: ClassVar[str] = "C010"
    title: ClassVar[str] = "tokens-by-all-to-all"
    checks: ClassVar[str] = "the tokens cross X by all-to-all, within 2x the bytes the routing needs"
    rationale: ClassVar[str] = (
        "Mixture-of-experts routing moves the tokens, not the experts: an all-to-all sends each token to "
        "the row that owns its expert and its result back, within a small factor of the bytes the routing "
        "needs, however the rounds are written.")

    result: Callable[[dict], int]

    def describe(self) -> str:
        return (f"tokens travel by all-to-all over X, moving at most {BYTES_FACTOR}x the bytes that "
                f"routing each token only to its expert's row needs")

    def need(self, case, B) -> tuple[int, int]:
        """(m, bytes per device) of a perfectly routed all-to-all for routing B."""
        s = case.all_sizes
        nX = s["nX"]
        B = np.asarray(B).reshape(s["S"], -1)
        row = np.repeat(np.arange(s["S"]) // (s["S"] // nX), B.shape[1])
        pairs = np.zeros((nX, nX), int)
        np.add.at(pairs, (row, B.reshape(-1) // (s["E"] // nX)), 1)
        m = int(pairs.max())
        return m, nX * m * (s["D"] + self.result(s)) * F32

    @staticmethod
    def least(case, B) -> tuple[int, int]:
        """(tokens, bytes per device): what the all-to-alls must carry at the least on routing
        B. The busiest row's tokens bound for other rows (each counted once per destination
        row) must leave it, D floats each; its nY devices share that, so every device sends at
        least its D/nY of each."""
        s = case.all_sizes
        nX, rows = s["nX"], s["S"] // s["nX"]
        B = np.asarray(B).reshape(s["S"], -1)
        leaving = max(sum(len(set(int(e) // (s["E"] // nX) for e in B[i]) - {r})
                          for i in range(r * rows, (r + 1) * rows)) for r in range(nX))
        return leaving, leaving * s["D"] * F32 // s["nY"]

    def violations(self, analysis, case, inputs=()) -> list[str]:
        s = case.all_sizes
        if s["nX"] < 2:
            return []
        over_x = [c for c in analysis.collectives if "X" in c.axes]
        floats = [c for c in over_x if c.operands and c.operands[0].dtype.startswith(("f", "bf", "c"))]
        tokens = [c for c in floats if c.kind == "all-to-all"]
        if not tokens:
            return [f"no all-to-all over X moves the tokens (observed over X: {_observed(over_x)}); "
                    f"allowed: tokens travel to the rows that own their experts with "
                    f"jax.lax.all_to_all over X. An all-reduce or all-gather that broadcasts them "
                    f"to every row does not count: every row then receives every token"]
        problems = []
        # Beside the all-to-alls, floats cross X only in small amounts (a loop bound agreed with a
        # float pmax): a psum over X of zero-padded experts, or a ring of permutes carrying them,
        # brings the experts to the tokens, and a device needs at least one expert's [D, R] slice
        # for that. All-gathers are NoGatherOverX's to report.
        other = [c for c in floats if c.kind not in ("all-to-all", "all-gather")]
        expert = s["D"] * self.result(s) * F32
        sent = sum(c.bytes * (c.count if c.count is not None else 1) for c in other)
        if sent >= expert:
            problems.append(f"floats cross X by {_observed(other)}: {sent:,} bytes per device, as much as one "
                            f"expert's [D, {self.result(s)}] slice ({expert:,} bytes); allowed: floats cross X "
                            f"in all-to-alls, and otherwise less than that (a loop bound, a few numbers). Each "
                            f"expert's matrix stays on its row: the tokens travel to it in all-to-alls, and "
                            f"their results come back the same way")
        # Integers cross X as ids and counts, a round's worth at a time. An integer all-reduce or
        # permute that carries one expert's slice in one run is the experts' bits in another type
        # (`jax.lax.bitcast_convert_type`). Judged per run: ids and counts sent every round of a
        # long loop add up to an expert's bytes without being one.
        ints = [c for c in over_x if c not in floats and c.kind not in ("all-to-all", "all-gather")]
        smuggled = [c for c in ints if c.bytes >= expert]
        if smuggled:
            problems.append(f"integers cross X by {_observed(smuggled)}, each run as many bytes as one expert's "
                            f"[D, {self.result(s)}] slice ({expert:,} bytes) or more; allowed: integers that "
                            f"cross X outside the all-to-alls are ids and counts, far smaller. Each expert's "
                            f"matrix stays on its row (in any type): the tokens travel to it in all-to-alls")
        if any(c.count is None for c in over_x):
            return problems + [f"cannot count the bytes moved over X: a collective runs an unknown number "
                               f"of times (observed: {_observed(over_x)})"]
        if len(inputs) < 3:  # called without the case's inputs: the routing is unknown
            return problems
        leaving, least = self.least(case, inputs[2])
        carried = bytes_sent(tokens)
        if carried < least:
            problems.append(f"the all-to-alls over X carry {carried:,} bytes per device; the tokens need at "
                            f"least {least:,}: {leaving} of the busiest row's tokens are bound for other "
                            f"rows, D={s['D']} floats each, shared by its nY={s['nY']} devices. The "
                            f"tokens must travel to their experts' rows in the all-to-alls (observed: "
                            f"{_observed(tokens)})")
        m, need = self.need(case, inputs[2])
        moved = bytes_sent(over_x)
        if moved <= BYTES_FACTOR * need:
            return problems
        return problems + [
            f"moves {moved:,} bytes per device over X; allowed: at most {BYTES_FACTOR}x the "
            f"{need:,} that an all-to-all routing each token only to its expert's row needs "
            f"on this routing (nX={s['nX']} blocks per round, {m} (token, expert) pairs for "
            f"the busiest pair of rows, each carrying D={s['D']} floats there and "
            f"{self.result(s)} back; counted: each collective's whole operand, ids and the "
            f"device's own block included, times its runs). {self._why(tokens, m, s)} "
            f"Observed: {_observed(over_x)}"]

    def _why(self, tokens, m: int, s: dict) -> str:
        """Which of the two ways to move too much it was: too many rounds, or whole rounds of
        padding (a chunk too large for the busiest pair's m pairs)."""
        def chunk(c):  # [nX, chunk, D] in one operand, or nX operands of [1, chunk, D] (XLA:CPU)
            dims = c.operands[0].dims
            whole = len(c.operands) == 1 and len(dims) == 3 and dims[0] == s["nX"]
            split = len(c.operands) == s["nX"] and len(dims) == 3 and dims[0] == 1
            return dims[1] if whole or split else None

        # Rows wider than a token or a device's result columns: the excess is in every slot.
        wide = [c for c in tokens if c.operands[0].dims and c.operands[0].dims[-1] > max(s["D"], self.result(s))]
        if wide:
            return (f"Your all-to-all of {wide[0].shape} carries rows of {wide[0].operands[0].dims[-1]} floats, "
                    f"more than a token's D={s['D']} or a device's {self.result(s)} result columns: each device "
                    f"should send back only its own columns (a shard_map manual over X alone leaves Y to the "
                    f"compiler, whose nY devices of a row then each send whole rows).")
        rounds = [(chunk(c), c.count) for c in tokens if chunk(c)]
        if rounds:
            chunk, runs = max(rounds)
            needed = -(-m // chunk)
            if runs <= needed:
                return (f"Your {runs} round(s) of chunk {chunk} are what the busiest pair needs; the excess "
                        f"is padding: its {m} pairs fill {m} of the {runs * chunk} slots a row sends it, and "
                        f"every round sends whole blocks to every row. Use a smaller chunk: at most "
                        f"{CHUNK_TEXT} = {safe_chunk(s)} pairs per destination (at most half of the fewest "
                        f"pairs any device sends its busiest row), so the last round's padding costs less "
                        f"than half of the need.")
            return (f"It runs {runs} rounds of chunk {chunk} where the busiest pair of rows needs "
                    f"{needed}: send each token only to the row that owns its expert, and stop when the "
                    f"busiest pair of rows is done.")
        return ("Send each token only to the row that owns its expert, and stop when the busiest pair "
                "of rows is done.")


NO_DENSE_GATHER_X = SmallValues(
    lambda s: s["S"] * s["D"] * s["F"] // s["nX"],
    "the dense gather of a device's own tokens, S*D*F/nX elements", result=whole_f, where="gather")

ROUTED_X = AllOf(
    (TokensByAllToAll(result=whole_f), NoGatherOverX(result=whole_f),
     dataclasses.replace(NO_DENSE_GATHER_X, where="rounds"), _activations(whole_f)))

ROUTED = AllOf(
    (TokensByAllToAll(result=per_device_f), NoGatherOverX(), NO_DENSE_ROUNDS, NOT_ALL_ACTIVATIONS))


def routing(case: Case, seed: int) -> np.ndarray:
    """The expert assignments B of a case that names its routing (``experts_used`` among its
    sizes; `graders.hidden.problem2` says why each): int32[S], or int32[S, k] with k.
    - ``experts_used = E``: uniform: each row of devices spreads its tokens evenly over all
      experts, in a random order (with k = E, every token goes to every expert once);
    - ``experts_used = 1``: every token to one expert;
    - ``1 < experts_used < E``: skewed: the used experts get tokens with probabilities falling
      as 1, 1/2, 1/3, ..., the others none; a top-k token's choices are drawn independently."""
    s = case.all_sizes
    E, S, k = s["E"], s["S"], s.get("k")
    used = s.get("experts_used", E)
    rng = np.random.default_rng([seed, 2])
    experts = rng.permutation(E)[:used]
    shape = (S,) if k is None else (S, k)
    if k is not None and k == E and used == E:
        chosen = np.stack([rng.permutation(E) for _ in range(S)])  # every expert, once each
    elif used == E:  # even: each row's (token, choice) pairs cycle through the experts, shuffled
        rows = np.arange(S * (k or 1)).reshape(s["nX"], -1) % E
        chosen = experts[rng.permuted(rows, axis=1)].reshape(shape)
    else:  # skewed over the used experts (one expert when used == 1)
        weights = 1.0 / np.arange(1, used + 1)
        chosen = experts[rng.choice(used, size=shape, p=weights / weights.sum())]
    return chosen.astype(np.int32)


def routed_inputs(part: Part, case: Case, seed: int) -> list[np.ndarray]:
    """W, A and B: B follows the case's routing when it names one (every hidden case does),
    else experts drawn uniformly at random (the visible cases)."""
    W, A, B = make_inputs(part, case, seed)
    return [W, A, routing(case, seed) if "experts_used" in case.sizes else B]


def size_problems(part_name: str, s: dict) -> list[str]:
    """Why sizes `s` (with nX, nY) would make the design a part asks for break its own rule,
    whatever the student writes (empty when they do not): gathered tokens and a partial
    [S, F/nY] output must stay below a device's share of [S, D, F] (F/nY > nX and D > nX), a
    device's experts, carried through the rounds' loop, below [S, D] (E/nX * F/nY < S), and
    the output [S, F] below S*D*F (D >= 2). The hidden cases all pass this."""
    R = whole_f(s) if part_name.endswith("_x") else per_device_f(s)
    G, nX = s["E"] // s["nX"], s["nX"]
    problems = []
    if s["D"] < 2 or s["E"] >= s["S"]:
        problems.append("D >= 2 and E < S keep the output and the experts below S*D*F")
    if part_name != "moe_local" and not (R > nX and s["D"] > nX):
        problems.append("gathered tokens [S, D] and a partial output [S, F/nY] need F/nY > nX and D > nX")
    if part_name not in ("moe_local", "moe_jit") and nX >= 2 and G * R >= s["S"]:
        problems.append("a device's experts [E/nX, D, F/nY] must stay below [S, D]: E/nX * F/nY < S")
    return problems


EXPERTS_STAY = KeepsOnAxis("W", "X", pieces_of="A")
"""The experts stay on their rows: no collective the submission writes carries W over X, and the
shard_map takes W as it arrives (what crosses X is read in pieces of one token's row)."""
GATHERS_THE_TOKENS = (UsesShardMap(), EXPERTS_STAY, WritesCollective("all_gather", over="X", of="A"))
"""How the all-gather parts are written: a shard_map whose jax.lax.all_gather over X carries the tokens."""
ROUTES_THE_TOKENS = (UsesShardMap(), EXPERTS_STAY, WritesCollective("all_to_all", over="X", of="A"))
"""How the all-to-all parts are written: a shard_map whose jax.lax.all_to_all over X carries the tokens."""


ASSIGNMENT = Assignment(
    name="problem2",
    title="Problem 2: mixture-of-experts routing",
    book_url="https://jax-ml.github.io/scaling-book/jax-stuff/",
    inputs=routed_inputs,
    parts=(
        Part(
            name="moe_local", points=3,
            task="Out[i] = A[i] @ W[B[i]] on one device (no mesh), never building an [S, D, F] value.",
            args=(W_ONE, A_ONE, B_ONE), result=OUT_ONE, rules=(NO_DENSE_LOCAL,), reference=moe,
            visible_case=VISIBLE_LOCAL, takes_mesh=False,
        ),
        Part(
            name="moe_jit", points=1,
            task="The same values on sharded inputs: jax.jit of a local algorithm, result P('X', 'Y').",
            args=(W, A, B), result=OUT, rules=(AnyCommunication(), JitOnly()), reference=moe,
            visible_case=VISIBLE,
        ),
        Part(
            name="moe_allgather", points=2,
            task="shard_map with an explicit all_gather of the tokens and a local reorder.",
            args=(W, A, B), result=OUT, rules=(NO_DENSE_GATHER, *GATHERS_THE_TOKENS), reference=moe,
            visible_case=VISIBLE,
        ),
        Part(
            name="moe_all_to_all", points=8,
            task="shard_map; each token travels only to the row of devices that owns its expert, "
                 "with jax.lax.all_to_all over X in a jax.lax.while_loop over fixed-size chunks; "
                 "right for any routing.",
            args=(W, A, B), result=OUT, rules=(ROUTED, *ROUTES_THE_TOKENS), reference=moe,
            visible_case=VISIBLE,
        ),
        Part(
            name="moe_topk", points=1,
            task="Top-k routing, B int32[S, k]: Out[i] = mean over j of A[i] @ W[B[i, j]], built on "
                 "the all-to-all version.",
            args=(W, A, B_TOPK), result=OUT, rules=(ROUTED, *ROUTES_THE_TOKENS), reference=moe,
            visible_case=VISIBLE_TOPK,
        ),
        Part(
            name="moe_allgather_x", points=1,
            task="The book's latest shardings, W[E_X, D, F] and A[S_X, D], result P('X', None): "
                 "shard_map with an all_gather of the tokens over X; any local grouping (padded "
                 "buffer, jax.lax.scan over experts, jax.lax.ragged_dot).",
            args=(W_X, A_X, B), result=OUT_X, rules=(NO_DENSE_GATHER_X, *GATHERS_THE_TOKENS), reference=moe,
            visible_case=VISIBLE_X,
        ),
        Part(
            name="moe_all_to_all_x", points=2,
            task="The book's latest shardings, result P('X', None): each token travels only to "
                 "the row of devices that owns its expert, with jax.lax.all_to_all over X in a "
                 "jax.lax.while_loop over fixed-size chunks; right for any routing.",
            args=(W_X, A_X, B), result=OUT_X, rules=(ROUTED_X, *ROUTES_THE_TOKENS), reference=moe,
            visible_case=VISIBLE_X,
        ),
    ),
    written=(
        WrittenPart(
            "written_jit_communication", 2,
            "What did jax.jit insert to run your local algorithm on sharded inputs, and what does "
            "it cost?"),
        WrittenPart(
            "written_slots", 1,
            "Why does each expert's row of the [E, S, D] buffer need S slots, and what goes "
            "wrong with fewer?"),
        WrittenPart(
            "written_speed_moe", 2,
            "How much faster than the all-gather version does the cost model say the all-to-all "
            "version is on a TPU v5e, and why; how does skew change it?"),
    ),
)
