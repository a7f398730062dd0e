"""RestoreLockedCells: nbgrader's OverwriteCells, warning only about real changes."""
from __future__ import annotations

from nbformat import NotebookNode
from nbgrader import utils
from nbgrader.preprocessors import ClearHiddenTests, ClearMarkScheme, OverwriteCells


class RestoreLockedCells(OverwriteCells):
    """Restore every locked cell from the gradebook, as OverwriteCells does, without its
    "Attribute 'checksum' for cell ... has changed!" warning for a cell that is exactly as
    released: nbgrader records a cell's checksum before removing its hidden tests or mark
    scheme, so every untouched cell that had one would otherwise be reported as tampered
    with. A cell whose text differs from the release is still reported, and restored."""

    def preprocess_cell(self, cell, resources, cell_index):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id is not None and utils.is_locked(cell):
            try:
                source = self.gradebook.find_source_cell(grade_id, self.notebook_id, self.assignment_id)
            except Exception:  # not in the database: OverwriteCells says so
                source = None
            if (source is not None and source.locked and source.cell_type == cell.cell_type
                    and cell.source == self.released_source(source.source)):
                cell.source = source.source
        return super().preprocess_cell(cell, resources, cell_index)

    def released_source(self, source: str) -> str:
        """A locked cell's source as the release shows it: hidden tests and mark scheme
        removed, with the course's delimiters (nbgrader's database keeps the cell as it was
        before both were removed)."""
        cell = NotebookNode(source=source)
        ClearHiddenTests(parent=self)._remove_hidden_test_region(cell)
        ClearMarkScheme(parent=self)._remove_mark_scheme_region(cell)
        return cell.source
