"""The feedback page as a student reads it, on nbgrader's own route (graders.demo's course:
generate_assignment, autograde, generate_feedback with the kit's template), for the demo's
`mistakes` submission of problem1, in headless Chromium at 1280 and 1024 px: messages wrap at
whole words, one piece of advice per function, no raw score after a grade cell, tables read
left-aligned, hints fold under a summary one can click, and a whole-array roll gets its
picture and no note meant for a roll built from slices. The class report built from the same
results wraps its messages at words too."""
from __future__ import annotations

import os
import re

import pytest
from routes import launch_chromium, sync_playwright

from graders.demo import autograde_course, prepare_course, read_gradebook, write_submissions
from graders.report import main as report_main

pytestmark = [pytest.mark.slow, pytest.mark.nbgrader]
ASSIGNMENT = "problem1"
WIDTHS = (1280, 1024)
SPLIT_WORDS = """(selector) => {
  // Words (runs of letters, digits and _) that the page breaks across two lines, in the
  // elements `selector` names: "communica / tion", "s / hard_map".
  const split = [];
  for (const box of document.querySelectorAll(selector)) {
    const walker = document.createTreeWalker(box, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const m of node.data.matchAll(/\\w{2,}/g)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
        if (tops.size > 1 && range.getBoundingClientRect().width < box.clientWidth) split.push(m[0]);
      }
    }
  }
  return split;
}"""


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    course = str(tmp_path_factory.mktemp("feedback-page"))
    prepare_course(ASSIGNMENT, course)
    write_submissions(course, ASSIGNMENT)
    autograde_course(ASSIGNMENT, course)
    return course


def feedback(course: str, student: str = "mistakes") -> str:
    return os.path.join(course, "feedback", student, ASSIGNMENT, f"{ASSIGNMENT}.html")


def message(html: str, function: str) -> str:
    """The text of `function`'s grade cell message on the page."""
    start = html.index(f'<a name="{function}"></a>')
    block = html[start:html.index('<pre class="kit-message">', start)]
    end = html.index("</pre>", start + len(block))
    return re.sub(r"<[^>]+>", "\n", html[start + len(block):end])


def test_no_raw_score_after_a_grade_cell_but_nbgrader_still_reads_it(course):
    """Is a grade cell's value (its score, which nbgrader reads as partial credit) kept for the
    gradebook, where roll_diff's 0.8 still counts, and never shown as an "Out[ ]:"?"""
    html = open(feedback(course)).read()
    assert "Out[" not in html and "output_execute_result" not in html
    assert read_gradebook(course, ASSIGNMENT)["mistakes"]["roll_diff"][0] == pytest.approx(0.8)


def test_one_piece_of_advice_per_function(course):
    """Does each function's message give its advice once (on the first case it fits, the later
    cases saying only what was observed on them), and no sentence end glued to the next with
    ".;"?"""
    html = open(feedback(course)).read()
    for function, advice in [("roll_diff", "Try: roll inside each shard"),
                             ("shard_average_jit", "Try: average each shard where it lives")]:
        text = message(html, function)
        assert text.count(advice) == 1 and text.count("- [mesh") == 4, text  # once, on the first case
        assert text.index("- [mesh") < text.index(advice) < text.index("- [mesh", text.index(advice)), text
    assert ".;" not in html


def test_a_whole_array_roll_gets_its_picture_and_no_note_for_slices(course):
    """jnp.roll of the whole array (wrong values and a collective-permute): is what it sends
    drawn step by step, and is the note for a roll built from slices left out (it does not fit
    what this code did)?"""
    html = open(feedback(course)).read()
    assert "What roll_diff sends on mesh 2x4, S=16, D=8, shift=1, step by step" in html
    text = message(html, "roll_diff")
    assert "|shift| = 11" in text or "shift=11" in text  # the case fails ...
    assert "built from slices" not in text and "reduce the shift" not in text  # ... with no slices note


def test_the_page_reads_well_in_a_browser(course, tmp_path):
    """At 1280 and 1024 px, light theme: no word of a message or a table broken across lines,
    markdown tables left-aligned, every hint folded under a visible summary that opens it
    when clicked (no script runs: the content security policy stays), and the class report's
    messages wrapped at words as well."""
    report = str(tmp_path / "report.html")
    assert report_main([os.path.join(course, "graded", ASSIGNMENT), "-o", report]) == 0
    start = sync_playwright()
    with start() as playwright:
        browser = launch_chromium(playwright)
        try:
            for width in WIDTHS:
                page = browser.new_page(viewport={"width": width, "height": 900}, color_scheme="light")
                page.goto("file://" + feedback(course))
                assert "script-src" not in page.content() and "default-src 'none'" in page.content()
                assert page.locator(".kit-message").count() == 5
                assert page.evaluate(SPLIT_WORDS, ".kit-message > span, .rendered_html td, .rendered_html th") == []
                aligned = page.evaluate("""() => [...document.querySelectorAll('.rendered_html td, .rendered_html th')]
                                           .map(c => getComputedStyle(c).textAlign)""")
                assert aligned and set(aligned) == {"left"}, set(aligned)
                table = page.locator(".rendered_html table").first.bounding_box()
                prose = page.locator("text=You will write five functions").bounding_box()
                assert abs(table["x"] - prose["x"]) < 2, (table, prose)  # starts where the text does
                hints = page.locator("details:has(> summary:text-matches('^Hint'))")
                assert hints.count() >= 10
                assert page.evaluate("() => [...document.querySelectorAll('details')].every(d => !d.open)")
                summary = hints.first.locator("> summary")
                assert summary.is_visible() and summary.evaluate("s => getComputedStyle(s).display") == "list-item"
                hidden = hints.first.locator("> p").first
                assert not hidden.is_visible()
                summary.click()
                assert hints.first.evaluate("d => d.open") and hidden.is_visible()
                page.goto("file://" + report)
                assert page.evaluate(SPLIT_WORDS, "td.msg, td code.name") == []
                page.close()
        finally:
            browser.close()
