"""nbgrader settings for the course kit; run nbgrader commands from this folder."""
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)  # so nbgrader can load graders.nbgrader_plugin

from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor  # noqa: E402
from nbgrader.preprocessors import (  # noqa: E402
    AssignLatePenalties, CheckCellMetadata, ClearHiddenTests, Execute, GetGrades,
    IgnorePattern, LimitOutput, SaveAutoGrades,
)

from graders.nbgrader_plugin import FillGradeCells  # noqa: E402
from graders.nbgrader_plugin import DropClearedCellMetadata  # noqa: E402
from nbgrader.preprocessors import ClearOutput, DeduplicateIds, OverwriteCells, OverwriteKernelspec  # noqa: E402

c = get_config()  # noqa: F821

c.CourseDirectory.root = here
c.CourseDirectory.course_id = "scaling-jax"
c.CourseDirectory.source_directory = "source"
c.CourseDirectory.release_directory = "release"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(here, "gradebook.db")
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "*.jaxexport"]

c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# Student code runs in the kernel only for the notebook's own outputs; scores come from
# FillGradeCells, which grades outside the kernel. It must run after Execute (it replaces
# what the kernel printed) and before SaveAutoGrades (which reads its numbers).
c.Execute.timeout = 120
c.Execute.interrupt_on_timeout = True
c.Autograde.autograde_preprocessors = [
    Execute,
    IgnorePattern,
    ClearMetadataPreprocessor,
    LimitOutput,
    FillGradeCells,
    SaveAutoGrades,
    AssignLatePenalties,
    CheckCellMetadata,
]
# Feedback shows the grader's messages, never the instructor's hidden test lines.
c.GenerateFeedback.preprocessors = [GetGrades, ClearHiddenTests, CSSHTMLHeaderPreprocessor]
# Duplicated grade cells: nbgrader keeps the last one; the others become ordinary cells
# (without DropClearedCellMetadata nbgrader 0.9 fails the whole notebook).
c.Autograde.sanitize_preprocessors = [
    ClearOutput, DeduplicateIds, DropClearedCellMetadata, OverwriteKernelspec, OverwriteCells,
    CheckCellMetadata,
]
