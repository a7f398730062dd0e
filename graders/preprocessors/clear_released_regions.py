"""ClearHiddenTestsInReleasedCells, ClearMarkSchemeInReleasedCells: nbgrader's, on the course's
own (locked) cells only."""
from __future__ import annotations

from nbgrader import utils
from nbgrader.preprocessors import ClearHiddenTests, ClearMarkScheme


class ClearHiddenTestsInReleasedCells(ClearHiddenTests):
    """Remove hidden tests from the course's locked cells (restored from the gradebook by
    autograde), as nbgrader's ClearHiddenTests does; leave a student's own cells alone. Their
    text is theirs to read back, and one holding "### BEGIN HIDDEN TESTS" (in a markdown cell,
    or unclosed) made nbgrader fail that student's whole feedback."""

    def preprocess_cell(self, cell, resources, cell_index):
        if not utils.is_locked(cell):
            return cell, resources
        return super().preprocess_cell(cell, resources, cell_index)


class ClearMarkSchemeInReleasedCells(ClearMarkScheme):
    """Remove the mark scheme from the course's locked cells (the rubric), as nbgrader's
    ClearMarkScheme does; leave a student's own cells alone (an unclosed "### BEGIN MARK
    SCHEME" in a written answer made nbgrader fail that student's whole feedback)."""

    def preprocess_cell(self, cell, resources, cell_index):
        if not utils.is_locked(cell):
            return cell, resources
        return super().preprocess_cell(cell, resources, cell_index)
