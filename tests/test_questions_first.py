"""Predict, then check: in every release notebook, each written answer is asked before anything
answers it.

The written answers are the contracts' (`assignments.contracts.get_assignment(a).written`). For
each, the release notebook a student receives must hold

- its answer cell (the nbgrader cell of the same grade_id), with no model answer left in it;
- its question: a markdown cell marked `<a id="question-NAME"></a>`, before the answer cell;
- none of the model answer's figures (each `<span title="fig:...">` of the answer in
  source/, by name and by the value it prints) in any markdown cell before the answer cell:
  a figure quoted there is an answer given before the student writes theirs. After the answer
  cell the notebook may discuss the result.
"""
from __future__ import annotations

import os
import re

import nbformat
import pytest

from assignments.contracts import ASSIGNMENTS, get_assignment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIGURE = re.compile(r'<span title="fig:(\w+)">([^<]*)</span>')
# A figure's value is searched for as text only when it cannot be an ordinary number of the
# lesson: it carries a unit of the cost model's tables, or a thousands separator.
DISTINCT = re.compile(r"^[\d.,]+ ?(us|MB|x)$|^\d{1,3}(,\d{3})+$")

WRITTEN = [(a, w.name) for a in sorted(ASSIGNMENTS) for w in get_assignment(a).written]


def _notebook(kind: str, assignment: str):
    return nbformat.read(os.path.join(ROOT, kind, assignment, f"{assignment}.ipynb"), as_version=4)


def _answer_index(nb, name: str) -> int:
    found = [i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == name]
    assert len(found) == 1, f"{name}: {len(found)} answer cells"
    return found[0]


def _model_figures(assignment: str, name: str) -> dict[str, str]:
    """The figures the model answer quotes (in source/, the answer cell's solution)."""
    source = _notebook("source", assignment)
    return dict(FIGURE.findall(source.cells[_answer_index(source, name)].source))


def test_every_written_answer_is_covered():
    assert {name for _, name in WRITTEN} >= {"written_speed_moe", "written_speed", "written_vma",
                                             "written_bidirectional", "written_jit_communication"}


@pytest.mark.parametrize("assignment,name", WRITTEN)
def test_question_precedes_its_answer_cell(assignment, name):
    nb = _notebook("release", assignment)
    answer = _answer_index(nb, name)
    marker = f'<a id="question-{name}"></a>'
    questions = [i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and marker in c.source]
    assert len(questions) == 1, f"{assignment}: {name} has {len(questions)} question cells marked {marker}"
    assert questions[0] < answer, f"{assignment}: {name}'s question (cell {questions[0]}) comes after its answer cell ({answer})"
    assert "BEGIN SOLUTION" not in nb.cells[answer].source and not FIGURE.search(nb.cells[answer].source), \
        f"{assignment}: {name}'s answer cell still holds the model answer in the release"


def _given(text: str, figures: dict[str, str]) -> set[str]:
    """The model answer's figures that `text` quotes: by name (a marked figure) or by value."""
    named = {n for n, _ in FIGURE.findall(text)} & figures.keys()
    plain = FIGURE.sub("", text)
    values = {v for v in figures.values() if DISTINCT.match(v)}
    return named | {v for v in values if re.search(r"(?<![\d.,])" + re.escape(v) + r"(?![\d])", plain)}


@pytest.mark.parametrize("assignment,name", WRITTEN)
def test_no_model_answer_figure_before_the_answer_cell(assignment, name):
    nb = _notebook("release", assignment)
    answer = _answer_index(nb, name)
    figures = _model_figures(assignment, name)
    for i, cell in enumerate(nb.cells[:answer]):
        if cell.cell_type == "markdown":
            given = _given(cell.source, figures)
            assert not given, f"{assignment}: cell {i} gives {sorted(given)} of {name}'s model answer before its answer cell"


def test_the_check_finds_an_answer_given_first():
    """The check itself: a paragraph like problem2's old "Reading the result", which quoted the
    model answer's times and speed-up (one marked, the others as plain text) before the answer
    cell, is found; the same paragraph without figures is not."""
    figures = _model_figures("problem2", "written_speed_moe")
    t, g, x = figures["p2_all_to_all"], figures["p2_allgather"], figures["p2_speedup"]
    old = (f'At skew s = 1, the all-to-all version takes <span title="fig:p2_all_to_all">{t}</span> against '
           f'{g} for the all-gather version: {x} faster.')
    assert _given(old, figures) == {"p2_all_to_all", g, x}
    assert not _given("At skew s = 1, which version is faster, and by how much? Read 5 rounds, 36% of tokens.",
                      figures)
