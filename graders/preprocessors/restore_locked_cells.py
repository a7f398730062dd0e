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
        self.release_kind(cell)
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

    def release_kind(self, cell) -> None:
        """Give a cell the kind it was released as: a cell the release has no grade id for (a
        new or renamed id, none at all) becomes an ordinary cell; a released cell gets back its
        grade, solution and task flags (nbgrader restores its points, lock and type, but not
        these: a test cell marked as a solution, or not graded, failed the whole notebook, and
        it scored 0 on this route only). The graders grade the code whatever the flags say."""
        meta = cell.metadata.get("nbgrader")
        if meta is None:
            return
        grade_id = meta.get("grade_id") if isinstance(meta, dict) else None
        try:
            self.gradebook.find_source_cell(grade_id, self.notebook_id, self.assignment_id)
        except Exception:  # not a cell of the release (or no id): an ordinary cell
            if grade_id is not None:
                self.log.warning("Cell '%s' is not in the release: graded as an ordinary cell", grade_id)
            del cell.metadata["nbgrader"]
            return
        for flag, find in (("grade", self.gradebook.find_grade_cell), ("solution", self.gradebook.find_solution_cell),
                           ("task", self.gradebook.find_task_cell)):
            try:
                find(grade_id, self.notebook_id, self.assignment_id)
                released = True
            except Exception:
                released = False
            if bool(meta.get(flag, False)) != released:
                self.report_change(grade_id, flag, released, meta.get(flag, False))
            meta[flag] = released
        if not meta["grade"]:
            meta.pop("points", None)

    def released_source(self, source: str) -> str:
        """A locked cell's source as the release shows it: hidden tests and mark scheme
        removed, with the course's delimiters (nbgrader's database keeps the cell as it was
        before both were removed)."""
        cell = NotebookNode(source=source)
        ClearHiddenTests(parent=self)._remove_hidden_test_region(cell)
        ClearMarkScheme(parent=self)._remove_mark_scheme_region(cell)
        return cell.source
