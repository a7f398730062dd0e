"""nbgrader preprocessors of the course, one transformation each, in a file named after it.

`nbgrader_config.py` puts them in nbgrader's pipelines:
- `FillGradeCells` (autograde): the trusted graders' verdict in every grade cell, computed
  in the sandbox; no student code runs in a kernel.
- `RestoreLockedCells` (autograde's sanitizing): nbgrader's `OverwriteCells`, quiet about
  locked cells that are exactly as released (hidden tests and mark schemes removed).
- `DropClearedCellMetadata` (autograde's sanitizing): duplicated grade cells become ordinary
  cells instead of failing the notebook.
- `GetGradesWithPending` (feedback): nbgrader's `GetGrades`, also marking each written answer
  a human has not graded yet, so feedback says it waits for a grader instead of showing 0.
- `ClearHiddenTestsInReleasedCells`, `ClearMarkSchemeInReleasedCells` (feedback): nbgrader's,
  on the course's locked cells only, so that a student's own text with the delimiters in it
  cannot fail their feedback.
"""
from .clear_released_regions import ClearHiddenTestsInReleasedCells, ClearMarkSchemeInReleasedCells
from .drop_cleared_cell_metadata import DropClearedCellMetadata
from .fill_grade_cells import FillGradeCells
from .get_grades_with_pending import GetGradesWithPending
from .restore_locked_cells import RestoreLockedCells

__all__ = ["ClearHiddenTestsInReleasedCells", "ClearMarkSchemeInReleasedCells", "DropClearedCellMetadata", "FillGradeCells", "GetGradesWithPending", "RestoreLockedCells"]
