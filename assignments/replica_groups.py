"""Read the device groups of a collective from compiled HLO text, in every form XLA prints.

XLA prints the devices that take part in a collective in one of three ways, depending
on its version:

- explicit lists:   ``replica_groups={{0,1,2,3},{4,5,6,7}}``
- iota form:        ``replica_groups=[2,4]<=[8]`` or ``[4,2]<=[2,4]T(1,0)``
- named mesh axes:  ``replica_groups=mesh['X'=2,'Y'=4] {'Y'}``, optionally with
                    ``device_ids=([2,4]T(1,0))`` and sub-axes such as ``{'Y':(2)2}``

Each form becomes a list of groups of logical device ids. The mesh form's axis names
belong to XLA's own mesh, which need not be the JAX mesh (it may be permuted through
``device_ids``), so callers attribute groups to JAX mesh axes from the device ids alone.
"""
from __future__ import annotations

import re

import numpy as np

Groups = list[list[int]]


def _ints(text: str) -> list[int]:
    return [int(t) for t in re.findall(r"-?\d+", text)]


def _iota(reshape: list[int], transpose: list[int] | None) -> np.ndarray:
    ids = np.arange(int(np.prod(reshape)), dtype=np.int64).reshape(reshape)
    if transpose:
        ids = ids.transpose(transpose)
    return ids


def parse_iota(text: str) -> Groups:
    """``[G,S]<=[dims]T(perm)`` -> G groups of S ids."""
    m = re.fullmatch(r"\[([\d,]+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?", text.strip())
    if not m:
        raise ValueError(f"not an iota replica group list: {text!r}")
    shape = _ints(m.group(1))
    ids = _iota(_ints(m.group(2)), _ints(m.group(3)) if m.group(3) else None)
    return ids.reshape(shape[0], -1).tolist() if shape else [ids.reshape(-1).tolist()]


def parse_explicit(text: str) -> Groups:
    """``{{0,1},{2,3}}`` -> [[0,1],[2,3]]; ``{}`` -> [] (meaning: all devices)."""
    return [_ints(g) for g in re.findall(r"\{([\d,\s]*)\}", text.strip()[1:-1])]


_MESH = re.compile(
    r"mesh\[(?P<axes>[^\]]*)\]"
    r"(?:,\s*device_ids=\((?P<ids>[^)]*\)?)\))?"
    r"\s*\{(?P<groups>[^}]*)\}"
)


def parse_mesh_form(text: str) -> Groups:
    """``mesh['a'=2,'b'=4], device_ids=([2,4]T(1,0)) {'a', 'b':(2)2}`` -> groups."""
    m = _MESH.search(text)
    if not m:
        raise ValueError(f"not a mesh replica group: {text!r}")
    axes = [(a, int(n)) for a, n in re.findall(r"'([^']+)'=(\d+)", m.group("axes"))]
    sizes = [n for _, n in axes]
    ids_text = (m.group("ids") or "").strip()
    if not ids_text:
        ids = np.arange(int(np.prod(sizes)), dtype=np.int64)
    elif ids_text.startswith("["):
        im = re.fullmatch(r"\[([\d,]+)\](?:T\(([\d,]+)\))?", ids_text)
        if not im:
            raise ValueError(f"unreadable device_ids in {text!r}")
        ids = _iota(_ints(im.group(1)), _ints(im.group(2)) if im.group(2) else None)
    else:
        ids = np.array(_ints(ids_text), dtype=np.int64)
    ids = ids.reshape(sizes)

    # Each named (sub-)axis in the braces: 'b' (the whole axis) or 'b':(pre)size.
    wanted = re.findall(r"'([^']+)'(?::\((\d+)\)(\d+))?", m.group("groups"))
    # Split every axis at the sub-axis boundaries mentioned for it (major to minor).
    cuts: dict[str, set[int]] = {a: {1, n} for a, n in axes}
    for name, pre, size in wanted:
        if pre:
            cuts[name] |= {int(pre), int(pre) * int(size)}
    dims: list[int] = []
    owner: list[tuple[str, int, int]] = []  # (axis, pre, size) of each split dim
    for a, n in axes:
        points = sorted(cuts[a])
        for lo, hi in zip(points, points[1:]):
            dims.append(hi // lo)
            owner.append((a, lo, hi // lo))
    ids = ids.reshape(dims)
    grouped = []
    for i, (a, lo, size) in enumerate(owner):
        for name, pre, sub in wanted:
            if name != a:
                continue
            start, stop = (int(pre), int(pre) * int(sub)) if pre else (1, dict(axes)[a])
            if start <= lo and lo * size <= stop:
                grouped.append(i)
    rest = [i for i in range(len(dims)) if i not in grouped]
    group_size = int(np.prod([dims[i] for i in grouped])) if grouped else 1
    return ids.transpose(rest + grouped).reshape(-1, group_size).tolist()


def parse_replica_groups(attrs: str) -> Groups | None:
    """Find ``replica_groups=...`` in an instruction's attribute text and read it.

    Returns None when the instruction has no replica groups, and [] for ``{}``
    (every device in one group).
    """
    i = attrs.find("replica_groups=")
    if i < 0:
        return None
    rest = attrs[i + len("replica_groups="):]
    if rest.startswith("mesh["):
        return parse_mesh_form(rest)
    if rest.startswith("["):
        return parse_iota(re.match(r"\[[\d,]+\]<=\[[\d,]+\](?:T\([\d,]+\))?", rest).group(0))
    if rest.startswith("{"):
        depth = 0
        for j, ch in enumerate(rest):
            depth += ch == "{"
            depth -= ch == "}"
            if depth == 0:
                return parse_explicit(rest[: j + 1])
    raise ValueError(f"unreadable replica_groups: {rest[:80]!r}")


def parse_source_target_pairs(attrs: str) -> list[tuple[int, int]] | None:
    """``source_target_pairs={{0,1},{1,2}}`` -> [(0, 1), (1, 2)]."""
    m = re.search(r"source_target_pairs=\{((?:\{\d+,\d+\},?)*)\}", attrs)
    if not m:
        return None
    return [(int(s), int(t)) for s, t in re.findall(r"\{(\d+),(\d+)\}", m.group(1))]
