"""The shape of an exercise contract: what a graded function takes, returns and may communicate.

Each assignment's contract lives once, in `assignments/contracts/<assignment>.py`, and
drives the visible checks, the graders' hidden configurations and the reports.
The binding text is the course's PROBLEMS.md; these objects are that text in code.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

import numpy as np
from jax.sharding import PartitionSpec as P

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

    @property
    def partition_spec(self) -> P:
        return P(*self.spec)

    def describe(self, case: "Case | None" = None) -> str:
        dims = self.shape(case) if case else self.dims
        return f"{self.name}: {self.dtype}[{', '.join(map(str, dims))}] at {self.partition_spec}"


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
    rule: Any
    """A communication rule from `assignments.rules`."""
    reference: Callable[..., np.ndarray]
    """Dense float64 NumPy reference: ``reference(*arrays, mesh=(nX, nY), **statics)``."""
    visible_case: Case
    """The one small configuration the notebook's visible check uses."""
    statics: tuple[str, ...] = ()
    """Names of static keyword arguments (after ``mesh``)."""
    style: str | None = None
    """``'jit'``: must not use shard_map; ``'shard_map'``: must use it; None: either."""
    eager: bool = False
    """Called eagerly on concrete arrays, not traced: graded on the result's shape, dtype,
    sharding and values as reported by the submission's process (no artifact, no HLO)."""

    @property
    def signature(self) -> str:
        names = [a.name for a in self.args]
        return f"{self.name}({', '.join(names)}, *, {', '.join(('mesh',) + self.statics)})"


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
    return {
        "id": case_id, "mesh": list(case.mesh), "statics": dict(case.statics),
        "args": [{"shape": list(a.shape(case)), "dtype": a.dtype, "spec": list(a.spec)}
                 for a in part.args],
    }


def uses_shard_map(stablehlo_text: str) -> bool:
    """Does a lowered (StableHLO) program contain a shard_map region?"""
    return "manual_computation" in stablehlo_text or "SPMDFullToShardShape" in stablehlo_text
