"""What feedback removes (nbgrader's delimited regions), on hand-built notebooks: the course's
locked cells lose their hidden tests and mark schemes; a student's own text is left as written."""
from __future__ import annotations

# nbconvert and nbgrader take a second to import: the fast tier runs this module on one
# worker with their other tests (tests/conftest.py ONE_WORKER).


def cell(kind, source, **nbgrader):
    import nbformat

    made = nbformat.v4.new_code_cell(source) if kind == "code" else nbformat.v4.new_markdown_cell(source)
    if nbgrader:
        made.metadata["nbgrader"] = {"schema_version": 3, "grade": False, "solution": False, "locked": False,
                                     **nbgrader}
    return made


def test_a_students_delimiters_cannot_fail_their_feedback_and_the_courses_regions_go():
    """Do the course's locked test and rubric cells lose their hidden tests and mark scheme,
    while a written answer with an unclosed mark scheme and a markdown cell of the student's
    holding a hidden-tests region (each failed nbgrader's feedback for that student) pass
    through as written?"""
    # Imported here, not at the top: nbgrader's and nbformat's imports (about 1 s) would be
    # paid by every xdist worker of the fast tier when it collects this module.
    import nbformat

    from graders.preprocessors import ClearHiddenTestsInReleasedCells, ClearMarkSchemeInReleasedCells

    test = cell("code", "check(f)\n### BEGIN HIDDEN TESTS\nsecret_test()\n### END HIDDEN TESTS\n",
                grade=True, locked=True, points=2, grade_id="f")
    rubric = cell("markdown", "Rubric\n### BEGIN MARK SCHEME\nfull marks if ...\n### END MARK SCHEME\n",
                  locked=True, grade_id="rubric")
    answer = cell("markdown", "My answer.\n### BEGIN MARK SCHEME\n(I quote the delimiter)",
                  grade=True, solution=True, points=2, grade_id="written")
    own = cell("markdown", "### BEGIN HIDDEN TESTS\nmy notes\n### END HIDDEN TESTS")
    nb = nbformat.v4.new_notebook(cells=[test, rubric, answer, own])
    resources = {}
    for preprocessor in (ClearHiddenTestsInReleasedCells(), ClearMarkSchemeInReleasedCells(enforce_metadata=False)):
        nb, resources = preprocessor.preprocess(nb, resources)
    assert "secret_test" not in nb.cells[0].source and "check(f)" in nb.cells[0].source
    assert "full marks" not in nb.cells[1].source
    assert nb.cells[2].source == answer.source and nb.cells[3].source == own.source
