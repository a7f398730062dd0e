"""A content-addressed cache of the judge's verdicts.

The verdict on a given serialized artifact, for a given case and hidden inputs, under given
rules, never changes; in a real class many students hand in the same function (the
solution from the lecture, a common mistake). So each judged case is stored under the
SHA-256 of everything it depends on: the artifact's bytes, the case, its seed, and the
kit's judging code (`assignments/`, `graders/hidden/`); an identical case later is served
from here without compiling anything. The cache lives outside every sandbox (default
`.verdict-cache/` beside `nbgrader_config.py`; `$KIT_VERDICT_CACHE` to move it, `off` to
disable). Only verdicts the judge reached are stored, never a timeout or a crash, which can
depend on the machine's load.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VARIABLE = "KIT_VERDICT_CACHE"


def cache_dir() -> str | None:
    value = os.environ.get(VARIABLE, os.path.join(REPO_ROOT, ".verdict-cache"))
    return None if value.lower() in ("off", "0", "") else value


@functools.lru_cache(maxsize=1)
def judging_code_digest() -> str:
    """A digest of the code a verdict depends on: the runtime's rules, contracts, HLO
    reading and judging, and the hidden cases."""
    digest = hashlib.sha256()
    for folder in ("assignments", os.path.join("graders", "hidden")):
        for root, dirs, files in sorted(os.walk(os.path.join(REPO_ROOT, folder))):
            dirs.sort()
            for name in sorted(f for f in files if f.endswith(".py")):
                with open(os.path.join(root, name), "rb") as f:
                    digest.update(name.encode() + b"\0" + f.read())
    return digest.hexdigest()


def key(assignment: str, part: str, case: dict, seed: int, artifact: bytes) -> str:
    head = json.dumps([judging_code_digest(), assignment, part, case, seed], sort_keys=True)
    return hashlib.sha256(head.encode() + b"\0" + artifact).hexdigest()


def _path(folder: str, k: str) -> str:
    return os.path.join(folder, k[:2], k + ".json")


def load(k: str) -> dict | None:
    """The stored judge event for key `k`, or None."""
    folder = cache_dir()
    if folder is None:
        return None
    try:
        with open(_path(folder, k), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def store(k: str, event: dict) -> None:
    """Store a judge event (as JSON) atomically; a failure to write only costs speed."""
    folder = cache_dir()
    if folder is None:
        return
    path = _path(folder, k)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(event, f)
        os.replace(tmp, path)
    except OSError:
        pass
