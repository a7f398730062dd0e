"""The class report (`python -m graders.report`): problem kinds, communication patterns, scores
and the page, from hand-built results (no grading, no JAX). The graded corpora and the browser:
tests/test_report_corpora.py."""
from __future__ import annotations

import html
import os
import re
import urllib.parse

import pytest
from report_builders import (ALL_GATHER_BOTH, ALL_GATHER_Y, BOTH_WAYS, FUNCTIONS, HOSTILE, ONE_WAY,
                             analysis, class_folder, collective, failed, judged, page_text, submission)

from assignments.rulebook import rule_title
from graders.class_results import (NO_COMMUNICATION, NO_PROGRAM, WHOLE, Graded, NoResults, communication_pattern,
                                   example_case, first_line, first_problems, grading_seconds, histogram,
                                   pattern_table, problem_table, read_class, slowest_phase)
from graders.report import main as report_main
from graders.results import Failure, PartResult, full_stop, write_results


# --- problem kinds -------------------------------------------------------------------------------------


def test_problems_are_counted_by_the_rule_broken_first_per_function():
    """17 students gather over Y in roll_diff, 3 over X and Y: one rule broken (C001), so one
    row of 20 students, whatever the wording or the order of the collectives; a wrong result in
    the same function is another row (V005), fewer students, after it."""
    students = {f"gather_y_{i:02d}": submission(f"gather_y_{i:02d}", {"roll_diff": [judged("roll_diff", ALL_GATHER_Y)]})
                for i in range(17)}
    reordered = analysis(*reversed(ALL_GATHER_BOTH.collectives))
    students |= {f"gather_xy_{i}": submission(f"gather_xy_{i}", {"roll_diff": [judged("roll_diff", p)]})
                 for i, p in enumerate([ALL_GATHER_BOTH, reordered, ALL_GATHER_BOTH])}
    wrong = judged("roll_diff", analysis(), values_ok=False, values_problem="values wrong: all of it")
    students |= {f"wrong_{i}": submission(f"wrong_{i}", {"roll_diff": [wrong]}) for i in range(2)}
    table = problem_table([Graded(s, f"{s}/results.json", r) for s, r in students.items()])
    assert [(p.function, p.rule, p.kind, len(who)) for p, who in table] == [
        ("roll_diff", "C001", "C001 no-communication", 20), ("roll_diff", "V005", "V005 values", 2)]
    assert table[0][0].message.startswith("communication observed: all-gather over Y of f32[2,4] (32 bytes)")


@pytest.mark.parametrize("check, message", [
    ("E001", "not implemented (the function raises NotImplementedError)"),
    ("E001", "function roll_diff was not defined; define it as roll_diff(A, *, mesh, shift)"),
    ("E002", "raised while tracing: TypeError (submission, line 24: out = A.reshape(2, 4)): cannot reshape"),
    ("E003", "raised when run: XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory allocating"),
    ("V002", "wrong shape: got (16, 8), expected (2, 8) (out: float32[2, 8] at P('X', 'Y'))"),
    ("V004", "wrong sharding: got P(), expected P('X', 'Y') (add out_shardings to jax.jit, or fix out_specs)"),
])
def test_a_problem_counts_under_its_rule_whatever_its_words(check, message):
    """Two students whose first problems share a rule but not a word are one row, named by
    the rule's id and name."""
    graded = [Graded("a", "", submission("a", {"roll_diff": [failed(message, check)]})),
              Graded("b", "", submission("b", {"roll_diff": [failed("something else entirely", check)]}))]
    [(problem, students)] = problem_table(graded)
    assert (problem.rule, students) == (check, ["a", "b"])
    assert problem.kind == f"{check} {rule_title(check)}" and rule_title(check)
    assert problem.message == first_line(full_stop(message))


def test_a_failed_instructor_check_counts_under_its_own_id():
    """A function whose cases all pass but whose instructor's check fails is counted under T001,
    never as a problem of the whole submission."""
    from graders.results import Check

    result = submission("c", {})
    result.part("roll_diff").checks = [Check("test_docstring", "roll_diff", 1, passed=False, message="no docstring")]
    assert [(p.function, p.rule, p.kind) for p in first_problems(result)] == [
        ("roll_diff", "T001", "T001 instructor-check")]


def test_a_problem_of_the_whole_submission_counts_once():
    """A syntax error (the same note on every function), a refused file and a graders' failure:
    one problem each, not one per function, under the submission's check; a stub's
    NotImplementedError stays per function."""
    note = "while running your submission: submission has a syntax error at line 6: expected ':'; it was skipped"
    syntax = submission("syntax", {f: [failed(note, "E004")] for f in FUNCTIONS}, note=note)
    refused = submission("link", failure=Failure("/x/link.py is a symbolic link: only regular files are graded", False))
    broken = submission("broken", failure=Failure("the grading process failed (exit code 1)", True))
    stub = submission("stub", {f: [failed("not implemented (the function raises NotImplementedError)", "E001")]
                               for f in FUNCTIONS})
    assert [(p.function, p.rule) for p in first_problems(syntax)] == [(WHOLE, "E004")]
    assert [(p.function, p.rule) for p in first_problems(refused)] == [(WHOLE, "E004")]
    assert [(p.function, p.rule) for p in first_problems(broken)] == [(WHOLE, "E005")]
    assert [(p.function, p.rule) for p in first_problems(stub)] == [(f, "E001") for f in FUNCTIONS]


# --- communication patterns -------------------------------------------------------------------------------


@pytest.mark.parametrize("programs, pattern", [
    ([analysis()], NO_COMMUNICATION),
    ([], NO_PROGRAM),
    ([ONE_WAY], "ring of collective-permutes over Y (one way)"),
    ([BOTH_WAYS], "ring of collective-permutes over Y (both ways)"),
    ([ONE_WAY, BOTH_WAYS, ONE_WAY], "ring of collective-permutes over Y (both ways)"),
    ([analysis(collective("collective-permute", "X", group=2, shifts=(1,)))], "ring of collective-permutes over X"),
    ([analysis(collective("all-reduce", "Y"))], "all-reduce (psum) over Y"),
    ([ALL_GATHER_BOTH], "all-gather over X + all-gather over Y"),
    ([analysis(collective("all-to-all", "X", count=None, group=2))], "all-to-all over X in a loop"),
    ([analysis(collective("all-to-all", "X", count=4, group=2)), analysis(collective("all-reduce", "Y"))],
     "all-reduce (psum) over Y + all-to-all over X in a loop"),
])
def test_a_functions_pattern_is_what_its_programs_send(programs, pattern):
    """Is each program classified by what it sends: nothing, a ring one way or both ways (the
    direction unknown on a 2-device ring), a psum, an all-gather, an all-to-all in a loop;
    and over all cases together?"""
    cases = [judged("roll_diff", p) for p in programs] or [failed("function roll_diff was not defined")]
    part = PartResult("roll_diff", 2, cases)
    assert communication_pattern(part) == pattern


def test_the_picture_of_a_pattern_shows_a_case_that_has_it():
    """A ring that goes both ways on one mesh only: is that case the one drawn?"""
    part = PartResult("roll_diff", 2, [judged("roll_diff", p) for p in (ONE_WAY, ONE_WAY, BOTH_WAYS, ONE_WAY)])
    assert example_case(part) is part.cases[2]


def test_students_are_counted_per_pattern():
    programs = {"a": ONE_WAY, "b": ONE_WAY, "c": BOTH_WAYS, "d": analysis()}
    graded = [Graded(s, "", submission(s, {"roll_diff": [judged("roll_diff", p)]})) for s, p in programs.items()]
    assert [(pattern, [g.student for g in group]) for pattern, group in pattern_table(graded, "roll_diff")] == [
        ("ring of collective-permutes over Y (one way)", ["a", "b"]),
        (NO_COMMUNICATION, ["d"]), ("ring of collective-permutes over Y (both ways)", ["c"])]


def test_a_grading_nbgrader_made_is_timed_by_its_export_and_judging():
    """nbgrader's autograde records no total time: is the grader's own export-and-judge time
    used, and the longest phase named without the totals?"""
    result = submission("s", seconds=0.0)
    result.timings = {"export (all)": 2.0, "export and judge (all)": 7.5, "judge: deserialize and compile": 5.0,
                      "export: trace and export": 1.5}
    assert grading_seconds(result) == 7.5
    assert slowest_phase(result) == "judge: deserialize and compile 5.0 s"


def test_scores_fall_in_their_bins():
    """Nothing, each quarter of partial credit, full marks (and above, for a custom check)."""
    assert histogram([0, 0.1, 0.5, 0.99, 1.0, 1.5, 1.99, 2, 2], 2) == [1, 1, 2, 1, 2, 2]


# --- the page ---------------------------------------------------------------------------------------------


@pytest.fixture
def hostile_class(tmp_path):
    """A class with hostile names and messages, a damaged and a foreign results.json."""
    results = {name: submission(name, {"roll_diff": [judged("roll_diff", ALL_GATHER_Y)]}) for name in HOSTILE}
    sneaky = "raised while tracing: ValueError (submission, line 3: x): <img src=x onerror=alert(3)> </td></table>"
    results["sneaky"] = submission("sneaky", {"block_average_jit": [failed(sneaky)]})
    results["fine"] = submission("fine")
    folder = class_folder(tmp_path, results)
    os.makedirs(os.path.join(folder, "damaged"))
    with open(os.path.join(folder, "damaged", "results.json"), "w") as f:
        f.write('{"score": 1, "tests": [')
    other = submission("other")
    other.assignment = "problem2"
    write_results(os.path.join(folder, "other", "results.json"), other)
    return folder


SAFE_TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "nav", "a", "code", "em", "span",
             "table", "tr", "th", "td", "details", "summary", "figure", "figcaption", "div", "wbr", "svg", "g", "rect",
             "line", "text", "path", "polygon"}
"""What the page is made of: no script, no picture or frame that could load anything."""


def _elements(text: str) -> list[tuple[str, list[tuple[str, str]]]]:
    """Every element of an HTML text as a browser's parser meets it: (tag, attributes)."""
    from html.parser import HTMLParser

    found = []

    class Collect(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.append((tag, attrs))

    Collect().feed(text)
    return found


def test_names_and_messages_are_text_never_markup(hostile_class, capsys):
    """Hostile student names and messages: escaped everywhere, no script or event handler in the
    page, and links that stay file names (a folder called `javascript:...` too)."""
    assert report_main([hostile_class]) == 0
    text = page_text(os.path.join(hostile_class, "report.html"))
    elements = _elements(text)
    assert {tag for tag, _ in elements} <= SAFE_TAGS, {tag for tag, _ in elements} - SAFE_TAGS
    assert not [(tag, name) for tag, attrs in elements for name, _ in attrs if name.startswith("on")]
    assert not [value for _, attrs in elements for name, value in attrs
                if name == "href" and not value.startswith(("./", "#"))]
    for name in HOSTILE:
        assert html.escape(name, quote=True) in text
        assert f'href="./{html.escape(urllib.parse.quote(name, safe=""), quote=True)}/results.json"' in text
    assert "&lt;img src=x onerror=alert(3)&gt; &lt;/td&gt;&lt;/table&gt;" in text


def test_the_page_opens_offline_and_forbids_what_it_does_not_hold(hostile_class):
    """No script, stylesheet, font or picture to fetch; a policy that forbids them all."""
    report_main([hostile_class])
    text = page_text(os.path.join(hostile_class, "report.html"))
    assert "Content-Security-Policy" in text and "default-src 'none'" in text
    assert re.findall(r"https?://[^\s\"'<>]+", text) == ["http://www.w3.org/2000/svg"] * text.count("http://www.w3.org")
    assert not re.search(r"<(link|script|iframe|object|embed)\b|@import|url\(", text, re.I)


def test_unreadable_results_are_listed_not_fatal(hostile_class, capsys):
    """A damaged results.json and one of another assignment: is each listed with why, and the
    rest reported?"""
    assert report_main([hostile_class]) == 0
    said = capsys.readouterr().out
    assert f"wrote {os.path.join(hostile_class, 'report.html')}: problem1, 7 student(s); 2 results file(s)" in said
    results = read_class(hostile_class)
    assert {(u.student, u.why.split(" (")[0]) for u in results.unread} == {
        ("damaged", f"{os.path.join(hostile_class, 'damaged', 'results.json')} is not readable JSON"),
        ("other", "results of problem2, not problem1")}
    text = page_text(os.path.join(hostile_class, "report.html"))
    assert "results of problem2, not problem1" in text and "damaged" in text


def test_a_page_it_cannot_write_is_an_error_naming_the_folder(hostile_class, tmp_path, capsys):
    """Is `-o` into a folder that cannot be made a one-line error saying what to do?"""
    (tmp_path / "a-file").write_text("")
    assert report_main([hostile_class, "-o", str(tmp_path / "a-file" / "report.html")]) == 2
    assert capsys.readouterr().err == (f"error: cannot write into {tmp_path / 'a-file'}: it is a file, not a folder: "
                                       f"pass -o a path in a folder you can write\n")


def test_the_counts_on_the_page(hostile_class):
    """Five students gathered over Y in roll_diff, one raised in block_average_jit: are those
    the page's numbers, with every student's row and the rule of each function?"""
    report_main([hostile_class])
    text = page_text(os.path.join(hostile_class, "report.html"))
    assert '<tr data-function="roll_diff" data-kind="C001 no-communication" data-students="5">' in text
    assert '<tr data-function="block_average_jit" data-kind="E002 traces" data-students="1">' in text
    assert '<tr data-function="roll_diff" data-pattern="all-gather over Y" data-students="5">' in text
    assert '<tr data-function="roll_diff" data-pattern="no communication" data-students="2">' in text
    assert len(re.findall(r'<tr data-student="', text)) == 7
    assert "rule: no communication" in text


def test_links_lead_to_each_results_file_from_wherever_the_page_is(hostile_class, tmp_path):
    """With -o elsewhere, does every link on the page resolve to that student's results.json?"""
    out = os.path.join(str(tmp_path), "elsewhere", "class.html")
    assert report_main([hostile_class, "-o", out]) == 0
    hrefs = set(re.findall(r'href="(\./[^"]+)"', page_text(out)))
    targets = {os.path.normpath(os.path.join(os.path.dirname(out), urllib.parse.unquote(html.unescape(h))))
               for h in hrefs}
    expected = {os.path.join(hostile_class, s, "results.json") for s in [*HOSTILE, "sneaky", "fine"]}
    assert targets == expected and all(os.path.isfile(t) for t in targets)


def test_a_folder_without_results_exits_2_saying_what_it_looked_for(tmp_path, capsys):
    empty = tmp_path / "graded" / "problem1"
    empty.mkdir(parents=True)
    assert report_main([str(empty)]) == 2
    assert f"no results.json in {empty} (looked for {empty}/<student>/results.json" in capsys.readouterr().err
    assert report_main([str(tmp_path)]) == 2
    assert f"this looks like a course folder: pass {tmp_path / 'graded'}/<assignment> (problem1)" in capsys.readouterr().err
    assert report_main([str(tmp_path / "nowhere")]) == 2
    with pytest.raises(NoResults, match="no folder at"):
        read_class(str(tmp_path / "nowhere"))


def test_two_hundred_students_are_all_on_the_page(tmp_path):
    """Is every one of 200 students (every function with communication, a picture each) on
    the page, linked, in one file? (How long it takes: `benchmarks/report_time.py`.) Three
    patterns of communication, each student's results.json the first of its pattern's under
    the student's own name (writing 200 whole results would take longer than the report)."""
    students = [f"student_{i:03d}" for i in range(200)]
    firsts = class_folder(tmp_path, {student: submission(student, {
        f: [judged(f, [ONE_WAY, BOTH_WAYS, ALL_GATHER_BOTH][(i + k) % 3]) for k in range(6)] for f in FUNCTIONS})
        for i, student in enumerate(students[:3])})
    for i, student in enumerate(students[3:], start=3):
        first = students[i % 3]
        os.makedirs(os.path.join(firsts, student))
        with open(os.path.join(firsts, student, "results.json"), "w", encoding="utf-8") as f:
            f.write(page_text(os.path.join(firsts, first, "results.json")).replace(first, student))
    assert report_main([firsts]) == 0
    page = page_text(os.path.join(firsts, "report.html"))
    assert all(f'href="./{student}/results.json"' in page for student in students)
