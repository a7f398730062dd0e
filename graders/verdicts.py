"""A content-addressed cache of the judge's verdicts.

The verdict on a given serialized artifact, for a given case and hidden inputs, under given
rules, never changes; in a real class many students hand in the same function (the
solution from the lecture, a common mistake), and the export makes the same program give the
same bytes whatever cell, line or names it came from. So each judged case is stored under
the SHA-256 of everything its verdict depends on: the artifact's bytes, the case, its seed,
the kit's judging code (`assignments/`, `graders/sandboxed/`, `graders/hidden/`), the Python,
JAX and jaxlib versions and the judges' XLA flags; an identical case later is served from
here without compiling anything. The cache lives outside every sandbox (default
`.verdict-cache/` beside `nbgrader_config.py`; `$KIT_VERDICT_CACHE` to move it, `off` to
disable). Only verdicts of programs that compiled and ran to the end are stored (`ran`):
never a timeout, a crash or a compile or run error, which can depend on the machine's load
or on what an earlier program did to the judge's process.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import json
import os
import sys

from .files import write_atomic
from .sandbox import XLA_FLAGS
from .settings import KIT_ROOT

VARIABLE = "KIT_VERDICT_CACHE"
JUDGING_CODE = ("assignments", os.path.join("graders", "sandboxed"), os.path.join("graders", "hidden"))


def cache_dir() -> str | None:
    value = os.environ.get(VARIABLE, os.path.join(KIT_ROOT, ".verdict-cache"))
    return None if value.lower() in ("off", "0", "") else value


@functools.lru_cache(maxsize=1)
def judging_digest() -> str:
    """A digest of everything a verdict depends on besides its case: the kit's judging code
    (rules, contracts, HLO reading, the judge, the hidden cases), the Python, JAX and jaxlib
    that compile and run it, and the judges' XLA flags."""
    digest = hashlib.sha256()
    for folder in JUDGING_CODE:
        for root, dirs, files in sorted(os.walk(os.path.join(KIT_ROOT, folder))):
            dirs.sort()
            for name in sorted(f for f in files if f.endswith(".py")):
                with open(os.path.join(root, name), "rb") as f:
                    digest.update(name.encode() + b"\0" + f.read())
    versions = [sys.version, XLA_FLAGS] + [_version(p) for p in ("jax", "jaxlib", "numpy")]
    digest.update(json.dumps(versions).encode())
    return digest.hexdigest()


def _version(package: str) -> str:
    try:
        return f"{package}=={importlib.metadata.version(package)}"
    except importlib.metadata.PackageNotFoundError:
        return f"{package} missing"


def key(assignment: str, part: str, case: dict, seed: int, artifact: bytes) -> str:
    head = json.dumps([judging_digest(), assignment, part, case, seed], sort_keys=True)
    return hashlib.sha256(head.encode() + b"\0" + artifact).hexdigest()


def _path(folder: str, assignment: str, k: str) -> str:
    return os.path.join(folder, assignment, k[:2], k + ".json")


def holds_any(assignment: str) -> bool:
    """Could the cache serve any verdict of `assignment`? (False when it is off or has never
    stored one: a grading then starts a judge with its export, not at its first miss.)"""
    folder = cache_dir()
    return folder is not None and os.path.isdir(os.path.join(folder, assignment))


def load(assignment: str, k: str) -> dict | None:
    """The stored judge event of `assignment` for key `k`, or None."""
    folder = cache_dir()
    if folder is None:
        return None
    try:
        with open(_path(folder, assignment, k), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def store(assignment: str, k: str, event: dict) -> None:
    """Store a judge's verdict (as JSON) atomically, if its program ran (see the module's
    docstring); a failure to write only costs speed."""
    folder = cache_dir()
    if folder is None or not event.get("ran"):
        return
    with contextlib.suppress(OSError):
        write_atomic(_path(folder, assignment, k), json.dumps(event), durable=False)
