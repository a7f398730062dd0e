"""Hidden configurations: the cases each graded function is judged on, per assignment.

One module per assignment, named after it, defining `cases(part) -> list[Case]`; the
contract draws each case's inputs (`Assignment.inputs`: problem2's routings), from the seed.
Meshes follow PROBLEMS.md; sizes vary between meshes so that hard-coded shapes fail.

Input values are drawn in the grading parent from a per-course secret (`grading_secret`)
mixed with the case's id (`case_seed`), and never reach the submission's process. Reading the
kit's code is not enough to rebuild them; the same secret always gives the same inputs, so a
submission keeps its score. An eagerly graded part (called on concrete arrays, in the
submission's process) gets inputs from a public seed instead (`public_seed`): whatever that
process holds, the submission can read, and placing an array is graded on where its blocks
go, which no value tells in advance.
"""
from __future__ import annotations

import hashlib
import hmac
import importlib
import os
import secrets

from assignments.contract import Assignment, Case, Part, case_inputs

from ..settings import KIT_ROOT

SECRET_VARIABLE = "KIT_GRADING_SECRET"
"""An environment variable holding the course's secret (any text), if set."""
SECRET_FILE_VARIABLE = "KIT_GRADING_SECRET_FILE"
"""An environment variable naming the file that holds it (default: `DEFAULT_SECRET_FILE`)."""
DEFAULT_SECRET_FILE = os.path.join(KIT_ROOT, ".grading-secret")
"""The course's secret beside `nbgrader_config.py` (git-ignored, created on first use)."""


def secret_file() -> str:
    return os.environ.get(SECRET_FILE_VARIABLE) or DEFAULT_SECRET_FILE


def read_secret() -> bytes | None:
    """The course's secret if this machine has one (`$KIT_GRADING_SECRET`, else the secret
    file), without making one."""
    if os.environ.get(SECRET_VARIABLE):
        return os.environ[SECRET_VARIABLE].encode()
    try:
        with open(secret_file(), "rb") as f:
            return f.read().strip() or None
    except OSError:
        return None


def grading_secret() -> bytes:
    """The course's secret: `$KIT_GRADING_SECRET`, else the secret file, created with 32
    random bytes (readable by its owner only) the first time it is needed."""
    found = read_secret()
    if found is not None:
        return found
    path = secret_file()
    secret = secrets.token_hex(32).encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another grading made it first, or it is empty or unreadable
        found = read_secret()
        if found is None:
            raise RuntimeError(f"the course's secret {path} is empty or unreadable: restore it (a "
                               f"new secret changes every hidden input), or delete it to make one") from None
        return found
    with os.fdopen(fd, "wb") as f:
        f.write(secret + b"\n")
    return secret


def case_seed(assignment: str, part: str, index: int, secret: bytes | None = None) -> int:
    """The seed of one hidden case's inputs: the secret mixed with the case's id."""
    key = grading_secret() if secret is None else secret
    digest = hmac.new(key, f"{assignment}/{part}/{index}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big")


def public_seed(assignment: str, part: str, index: int) -> int:
    """The seed of an eagerly graded case's inputs: public (see the module's docstring)."""
    digest = hashlib.sha256(f"public/{assignment}/{part}/{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def _module(assignment: Assignment):
    return importlib.import_module(f"{__name__}.{assignment.name}")


def hidden_cases(assignment: Assignment) -> dict[str, list[Case]]:
    """{function name: [Case, ...]} for every graded function of the assignment."""
    module = _module(assignment)
    return {part.name: module.cases(part) for part in assignment.parts}


def hidden_inputs(assignment: Assignment, part: Part, case: Case, seed: int):
    """The hidden input arrays for one case (`Assignment.inputs`, from the case's secret seed)."""
    return case_inputs(assignment, part, case, seed)
