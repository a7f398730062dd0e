"""Profiling on the simulated devices: a `jax.profiler` trace, and a small table read from it.

The book asks you to "profile each" program. Here the 8 devices are threads of one CPU
process, so the times say nothing about a TPU (the cost model, `assignments.costs`, is for
that), but the trace shows the same thing a TPU profile would: which instructions of the
compiled program ran, on how many devices, and where the collectives sit between them.

    prof = profile(fn, *args)          # records a trace of a few runs
    prof.path                          # perfetto_trace.json.gz: open it at https://ui.perfetto.dev
    show(prof)                         # the table, read from the trace file itself
    collective_lines(prof.hlo)         # the collectives in compiled.as_text()
"""
from __future__ import annotations

import dataclasses
import glob
import gzip
import json
import os
import re
import tempfile

import jax
from rich import box
from rich.table import Table

from .hlo import COLLECTIVE_KINDS, _parse_module


@dataclasses.dataclass
class Profile:
    path: str
    """The Perfetto trace (``perfetto_trace.json.gz``) of the recorded runs."""
    hlo: str
    """The compiled program's HLO text (`compiled.as_text()`)."""
    runs: int


def profile(fn, *args, runs: int = 3, log_dir: str | None = None, **kwargs) -> Profile:
    """Compile `jax.jit(fn)`, run it once to warm up, then record `runs` runs with
    `jax.profiler.trace(..., create_perfetto_trace=True)`."""
    import functools

    compiled = jax.jit(functools.partial(fn, **kwargs)).lower(*args).compile()
    jax.block_until_ready(compiled(*args))
    log_dir = log_dir or tempfile.mkdtemp(prefix="jax-trace-")
    with jax.profiler.trace(log_dir, create_perfetto_trace=True):
        for _ in range(runs):
            jax.block_until_ready(compiled(*args))
    traces = sorted(glob.glob(os.path.join(log_dir, "**", "perfetto_trace.json.gz"), recursive=True),
                    key=os.path.getmtime)
    if not traces:
        raise RuntimeError(f"jax.profiler wrote no perfetto trace under {log_dir}")
    return Profile(traces[-1], compiled.as_text(), runs)


def events(path: str) -> list[dict]:
    """The complete ("X") events of a Perfetto/Chrome JSON trace."""
    with gzip.open(path, "rt") if path.endswith(".gz") else open(path) as f:
        data = json.load(f)
    items = data["traceEvents"] if isinstance(data, dict) else data
    return [e for e in items if e.get("ph") == "X"]


def summary(prof: Profile) -> list[dict]:
    """One row per instruction of the compiled program found in the trace: its opcode, how
    many times it ran (all devices together), on how many threads, and its total time."""
    computations, _ = _parse_module(prof.hlo)
    opcode = {i.name: i.opcode for insts in computations.values() for i in insts}
    rows: dict[str, dict] = {}
    for e in events(prof.path):
        name = e.get("name", "")
        if name not in opcode:
            continue
        row = rows.setdefault(name, {"instruction": name, "opcode": opcode[name], "events": 0,
                                     "threads": set(), "total_us": 0.0})
        row["events"] += 1
        row["threads"].add(e.get("tid"))
        row["total_us"] += float(e.get("dur", 0.0))
    out = []
    for row in sorted(rows.values(), key=lambda r: -r["total_us"]):
        row["threads"] = len(row["threads"])
        row["collective"] = row["opcode"].removesuffix("-start").removesuffix("-done") in COLLECTIVE_KINDS
        out.append(row)
    return out


def summary_table(prof: Profile, top: int = 12) -> Table:
    table = Table(title=f"read from {os.path.basename(prof.path)} ({prof.runs} runs, CPU threads, not a TPU)",
                  box=box.SIMPLE_HEAVY, title_justify="left")
    for col in ("instruction", "opcode", "runs x devices", "threads", "total us", "mean us"):
        # an opcode whole: "collective-permute", never "collective- / permute" in a narrow window
        table.add_column(col, justify="left" if col in ("instruction", "opcode") else "right", no_wrap=col == "opcode")
    for row in summary(prof)[:top]:
        style = "bold" if row["collective"] else None
        mean = row["total_us"] / max(row["events"], 1)  # whole us past 100: the table fits a 572 px output
        table.add_row(row["instruction"], row["opcode"], str(row["events"]), str(row["threads"]),
                      f"{row['total_us']:,.0f}", f"{mean:,.1f}" if mean < 100 else f"{mean:,.0f}", style=style)
    table.caption = "collectives in bold; open the trace at https://ui.perfetto.dev to see them on a timeline"
    return table


def show(prof: Profile, top: int = 12) -> None:
    from .display import console

    print(f"trace: {prof.path}")
    console.print(summary_table(prof, top))


def collective_lines(hlo: str) -> list[str]:
    """The lines of HLO text that run a collective (the book's way to find the all-reduce)."""
    kinds = "|".join(map(re.escape, COLLECTIVE_KINDS))
    pattern = re.compile(rf"=\s*\S+.*?\s({kinds})(-start|-done)?\(")
    return [line.strip() for line in hlo.splitlines() if pattern.search(line)]
