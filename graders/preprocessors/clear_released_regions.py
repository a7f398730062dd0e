"""ClearHiddenTestsInReleasedCells, ClearMarkSchemeInReleasedCells: nbgrader's, on the course's
own (locked) cells only."""
from __future__ import annotations

from nbgrader import utils
from nbgrader.preprocessors import ClearHiddenTests, ClearMarkScheme
from traitlets import List

# nbconvert's HTML exporter configures `NbConvertBase.display_data_priority`, which nbgrader's
# preprocessors inherit without declaring it configurable: traitlets then warns "Config option
# `display_data_priority` not recognized" on every generate_feedback. Declared configurable
# here, as nbgrader's own GetGrades declares it (the value plays no part in these two).
def _display_data_priority() -> List:
    return List(["text/html", "application/pdf", "text/latex", "image/svg+xml", "image/png", "image/jpeg",
                 "text/plain"]).tag(config=True)


class ClearHiddenTestsInReleasedCells(ClearHiddenTests):
    """Remove hidden tests from the course's locked cells (restored from the gradebook by
    autograde), as nbgrader's ClearHiddenTests does; leave a student's own cells alone. Their
    text is theirs to read back, and one holding "### BEGIN HIDDEN TESTS" (in a markdown cell,
    or unclosed) made nbgrader fail that student's whole feedback."""

    display_data_priority = _display_data_priority()

    def preprocess_cell(self, cell, resources, cell_index):
        if not utils.is_locked(cell):
            return cell, resources
        return super().preprocess_cell(cell, resources, cell_index)


class ClearMarkSchemeInReleasedCells(ClearMarkScheme):
    """Remove the mark scheme from the course's locked cells (the rubric), as nbgrader's
    ClearMarkScheme does; leave a student's own cells alone (an unclosed "### BEGIN MARK
    SCHEME" in a written answer made nbgrader fail that student's whole feedback)."""

    display_data_priority = _display_data_priority()

    def preprocess_cell(self, cell, resources, cell_index):
        if not utils.is_locked(cell):
            return cell, resources
        return super().preprocess_cell(cell, resources, cell_index)
