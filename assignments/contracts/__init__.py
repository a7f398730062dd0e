"""Every assignment's contract, by name: one module per assignment, each defining ASSIGNMENT.

A new assignment is a new module here (found automatically), named after the assignment.
"""
from __future__ import annotations

import importlib
import pkgutil

from ..contract import Assignment


def _discover() -> dict[str, Assignment]:
    found = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        assignment = importlib.import_module(f"{__name__}.{info.name}").ASSIGNMENT
        found[assignment.name] = assignment
    return found


ASSIGNMENTS: dict[str, Assignment] = _discover()


def get_assignment(name: str) -> Assignment:
    try:
        return ASSIGNMENTS[name]
    except KeyError:
        raise KeyError(
            f"unknown assignment {name!r}; known: {', '.join(sorted(ASSIGNMENTS))}"
        ) from None


def find_part(name: str):
    """The graded part called `name`, searched across every assignment."""
    for assignment in ASSIGNMENTS.values():
        for part in assignment.parts:
            if part.name == name:
                return assignment, part
    raise KeyError(f"no assignment has a graded function called {name!r}")
