"""A student's HTML on the pages the course renders from notebooks, without a browser: a
hand-built notebook whose written answer (and a markdown cell of the student's own) holds
hostile HTML, rendered by nbconvert's HTMLExporter with the course's nbgrader_config.py, as
`nbgrader generate_feedback` (the kit's "feedback" page) and formgrader's submission page
(the kit's "formgrade" page) render it. In a real browser, after a real autograde:
tests/test_hostile_html.py."""
from __future__ import annotations

import base64
import hashlib
import html.parser
import os
import re

import pytest

# nbconvert and nbgrader take a second to import: the fast tier runs this module on one
# worker with their other tests (tests/conftest.py ONE_WORKER).

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ANSWER = "My answer: each device averages the rows it holds, so **no collective** is needed."
HOSTILE = f"""{ANSWER}

- first, the rows stay where they are
- then each device sums its own block

<img src=x onerror="window.__pwned='img'">
<script>window.__pwned='script'</script>
<svg onload="window.__pwned='svg'"><animate onbegin="window.__pwned='animate'" attributeName="x"/></svg>
<iframe srcdoc="<script>parent.__pwned='iframe'</script>"></iframe>
[click here](javascript:window.__pwned='link')
<a href=" JaVaScRiPt:window.__pwned='a'">and here</a> <a href="&#106;avascript:window.__pwned='entity'">or here</a>
<details open ontoggle="window.__pwned='details'"><summary>more</summary>folded</details>
<form action="https://evil.example/"><button formaction="javascript:window.__pwned='form'">go</button></form>
<object data="https://evil.example/x.swf"></object><embed src="https://evil.example/x.swf">
<base href="https://evil.example/"><meta http-equiv="refresh" content="0;url=https://evil.example/">
<link rel="stylesheet" href="https://evil.example/x.css"><style>body {{ display: none }}</style>
<img src="https://evil.example/pixel.png"> <img src="data:text/html;base64,PHNjcmlwdD4=">
<span id="roll_diff" class="navbar navbar-fixed-top" style="background: url(https://evil.example/x)">fake bar</span>
<math><maction actiontype="statusline" xlink:href="javascript:window.__pwned='math'">m</maction></math>
"""
"""A written answer: markdown (bold, a list) and every way we know of to run a script, fetch or
lay something over the page."""
FORMGRADER_STATIC = "/formgrader/static/"


def cell(kind, source, **nbgrader):
    import nbformat

    made = nbformat.v4.new_code_cell(source) if kind == "code" else nbformat.v4.new_markdown_cell(source)
    if nbgrader:
        made.metadata["nbgrader"] = {"schema_version": 3, "grade": False, "solution": False, "locked": False,
                                     **nbgrader}
    return made


def schedule_figure() -> str:
    """A grade cell's picture as `FillGradeCells` writes it (`assignments.schedule`)."""
    from report_builders import analysis, collective

    from assignments.schedule import draw_schedule

    program = analysis(collective("all-gather", "Y"), collective("collective-permute", "X", group=2, shifts=(1,)))
    return draw_schedule(program, compact=True, title="What roll_diff sends on S=16, step by step")._repr_html_()


def notebook():
    """An autograded notebook as nbgrader renders it: a grade cell with the graders' message,
    picture and score, the hostile written answer, and a markdown cell of the student's own."""
    import nbformat

    graded = cell("code", "check(roll_diff)", grade=True, locked=True, points=2, grade_id="roll_diff", score=1.0)
    graded.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="roll_diff: 1/2 cases right\n"),
        nbformat.v4.new_output("display_data", data={"text/html": schedule_figure(), "text/plain": "steps"}),
        nbformat.v4.new_output("execute_result", data={"text/plain": "1.0"}, execution_count=1)]
    answer = cell("markdown", HOSTILE, grade=True, solution=True, points=2, grade_id="written_communication",
                  score=0.0, pending=True, comment="Good, but <img src=x onerror=\"window.__pwned='comment'\">")
    return nbformat.v4.new_notebook(cells=[cell("markdown", "# Problem 1"), graded, answer, cell("markdown", HOSTILE)])


def render(template: str) -> str:
    """The page, by the exporter nbgrader makes from the course's nbgrader_config.py."""
    from nbconvert.exporters import HTMLExporter
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=REPO_ROOT).load_config()
    if template == "feedback":  # what GetGradesWithPending leaves for the page
        resources = {"nbgrader": {"notebook": "problem1", "score": 1.0, "max_score": 4.0, "pending": 1,
                                  "pending_points": 2.0, "late_penalty": 0}}
    else:  # formgrader's SubmissionHandler
        resources = {"assignment_id": "problem1", "notebook_id": "problem1", "submission_id": "0123abcd",
                     "index": 0, "total": 1, "base_url": "", "student": "eve", "last_name": None,
                     "first_name": None, "notebook_path": "autograded/eve/problem1/problem1.ipynb"}
    page, _ = HTMLExporter(config=config, template_name=template).from_notebook_node(notebook(), resources=resources)
    return page


class Page(html.parser.HTMLParser):
    """Every element (tag, attributes), every script's text, and the text outside scripts and styles."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict]] = []
        self.scripts: list[tuple[dict, str]] = []
        self.text: list[str] = []
        self._in = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
        self._in = tag if tag in ("script", "style") else None
        if tag == "script":
            self.scripts.append((dict(attrs), ""))

    def handle_endtag(self, tag):
        self._in = None

    def handle_data(self, data):
        if self._in == "script":
            self.scripts[-1] = (self.scripts[-1][0], self.scripts[-1][1] + data)
        elif self._in is None:
            self.text.append(data)

    def csp(self) -> str:
        return next(a["content"] for t, a in self.elements
                    if t == "meta" and a.get("http-equiv", "").lower() == "content-security-policy")


def hostile_markup(page: Page) -> list:
    """What of the hostile answer could run, fetch, redirect or take over formgrader's score
    boxes (which it finds by id) or navigation bar (a fixed one)."""
    found = []
    for tag, attrs in page.elements:
        if (tag in ("iframe", "object", "embed", "form", "base", "math", "animate", "maction")
                or tag == "link" and not attrs.get("href", "").startswith(FORMGRADER_STATIC)
                or tag == "meta" and attrs.get("http-equiv", "").lower() == "refresh"
                or tag == "span" and ("id" in attrs or "navbar" in attrs.get("class", ""))):
            found.append((tag, attrs))
        for name, value in attrs.items():
            value = (value or "").strip().lower()
            if (name.startswith("on") or value.startswith("javascript:") or "evil.example" in value
                    or name in ("srcdoc", "formaction", "xlink:href")
                    or tag == "img" and name == "src" and not value.startswith("data:image/")):
                found.append((tag, name, value))
    return found


@pytest.mark.parametrize("template", ["feedback", "formgrade"])
def test_the_written_answer_keeps_its_markdown_and_loses_every_hostile_tag(template):
    """On the feedback page and formgrader's, is the hostile written answer (and the student's
    own markdown cell, and the grader's comment on the feedback page) shown as its text, bold and
    list, with no script, event handler, frame, form, plugin, foreign fetch or id left?"""
    rendered = render(template)
    page = Page(rendered)
    assert hostile_markup(page) == []
    text = " ".join(page.text)
    assert "My answer: each device averages the rows it holds" in text and "fake bar" in text
    assert rendered.count("<strong>no collective</strong>") == 2
    assert rendered.count("<li>first, the rows stay where they are</li>") == 2
    assert not [s for _, s in page.scripts if "__pwned" in s]
    assert "evil.example" not in " ".join(s for _, s in page.scripts)


def test_the_feedback_page_runs_no_script_and_fetches_nothing():
    """Does the feedback page carry the kit's content security policy (no script, nothing
    fetched) before anything but its title, and load no script (jQuery, require.js, MathJax,
    mermaid) and nothing else from another site?"""
    from graders.html_safety import FEEDBACK_CSP
    from graders.report import CSP as REPORT_CSP

    text = render("feedback")
    page = Page(text)
    assert page.csp() == FEEDBACK_CSP and FEEDBACK_CSP.startswith(REPORT_CSP)
    head = [t for t, _ in page.elements[:page.elements.index(("meta", {"http-equiv": "Content-Security-Policy",
                                                                      "content": FEEDBACK_CSP}))]]
    assert head == ["html", "head", "meta", "meta", "title"]
    assert page.scripts == []
    assert not re.search(r"(src|href)=\"(https?:)?//", text), re.findall(r"(?:src|href)=\"(?:https?:)?//[^\"]+", text)


def test_formgraders_page_runs_only_its_own_scripts():
    """Is the submission page the kit's (nbgrader's own carries no policy), with a content
    security policy first in <head> that allows formgrader's script files and exactly its one
    inline script (by hash), and no inline event handler?"""
    page = Page(render("formgrade"))
    tags = [t for t, _ in page.elements]
    assert tags[:4] == ["html", "head", "meta", "meta"]
    assert page.elements[3][1]["http-equiv"] == "Content-Security-Policy"
    policy = dict(d.strip().split(" ", 1) for d in page.csp().split(";"))
    inline = [s for a, s in page.scripts if "src" not in a]
    assert len(inline) == 1 and "var submission_id = \"0123abcd\";" in inline[0]
    digest = base64.b64encode(hashlib.sha256(inline[0].encode()).digest()).decode()
    assert policy["script-src"] == f"'self' 'sha256-{digest}'"
    assert policy["default-src"] == "'none'" and "unsafe" not in policy["script-src"]
    assert all(a["src"].startswith(FORMGRADER_STATIC) for a, _ in page.scripts if "src" in a)
    assert [s for a, s in page.scripts if "src" in a] == [""] * (len(page.scripts) - 1)
    assert not [(t, n) for t, a in page.elements for n in a if n.startswith("on")]


def test_the_kits_pictures_come_through_whole():
    """Does the sanitizer keep a grade cell's schedule picture as the kit draws it: every
    element, attribute and style (only the serialization differs)?"""
    from graders.html_safety import clean_html

    figure = schedule_figure()

    def shape(text):
        return [(t, {n: re.sub(r"\s*;\s*", ";", v).rstrip(";") if n == "style" else v for n, v in a.items()})
                for t, a in Page(text).elements]

    kept = shape(clean_html(figure))
    assert kept == shape(figure) and len(kept) > 30
    assert [t for t, _ in kept].count("title") >= 1  # the tooltips of the arrows stay


@pytest.mark.parametrize("snippet, kept", [
    ('<a href="https://jax.readthedocs.io/">docs</a>', '<a href="https://jax.readthedocs.io/">docs</a>'),
    ('<a href="#roll_diff">up</a>', '<a href="#roll_diff">up</a>'),
    ('<a href="/api/shutdown">x</a>', "<a>x</a>"),
    ('<a href="data:text/html,&lt;script&gt;">x</a>', "<a>x</a>"),
    ('<img src="data:image/png;base64,iVBORw0KGgo=" alt="plot">',
     '<img src="data:image/png;base64,iVBORw0KGgo=" alt="plot">'),
    ('<p style="color: red; position: fixed; top: 0">red</p>', '<p style="color: red;">red</p>'),
    ('<p style="color: red; background: u\\rl(https://evil.example/)">x</p>', "<p>x</p>"),
    ('<pre><code class="language-python">x = 1</code></pre>', "<pre><code>x = 1</code></pre>"),
    ('<div class="highlight hl-python"><pre><span class="k">def</span></pre></div>',
     '<div class="highlight hl-python"><pre><span class="k">def</span></pre></div>'),
    ("<svg><use href=\"#a\"/><image href=\"https://evil.example/x.png\"/><foreignObject><p>x</p></foreignObject></svg>",
     "<p>x</p>"),
    ("<!-- a comment --><h2 id=\"written_communication\">Why</h2>", "<h2>Why</h2>"),
    ("$x^2 < y$ and $$\\sum_i a_i$$", "$x^2 &lt; y$ and $$\\sum_i a_i$$"),
    ('<p><img src="https://evil.example/p.png" alt="my plot"><img src=x onerror="f()"> <svg onload="f()"> </svg></p>',
     "<p>my plot </p>"),
])
def test_the_sanitizer_keeps_what_a_page_needs_and_nothing_else(snippet, kept):
    """One construct each: links to the web and within the page kept, others not; inline images
    as data only (another image is its alt text); styles without position or fetches; syntax
    highlighting's classes, not others; no SVG that links or fetches, none left empty; no ids;
    math as the TeX typed."""
    from graders.html_safety import clean_html

    assert clean_html(snippet) == kept
