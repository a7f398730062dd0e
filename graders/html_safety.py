"""Student HTML never runs where the instructor, a grader or a classmate looks at it.

A notebook's markdown may hold raw HTML (`<img onerror=...>`, `<script>`, `<svg onload=...>`,
`<iframe srcdoc=...>`, `javascript:` links). The pages the kit renders from notebooks are
formgrader's submission page (in the instructor's logged-in Jupyter server, where a script
could call the Jupyter API as the instructor) and the feedback page (`nbgrader
generate_feedback`). Both are nbconvert HTMLExporter pages, set up in `nbgrader_config.py`:

- `clean_html` is the exporter's `clean_html` filter (`c.HTMLExporter.filters`), which
  nbconvert applies, with `c.HTMLExporter.sanitize_html = True`, to markdown cells and HTML
  and markdown outputs, and which the kit's templates (`graders/templates/feedback`,
  `graders/templates/formgrade`) apply to the cells nbgrader marks (written answers, graded
  cells) and graders' comments. nbconvert's own `clean_html` escapes `<p>`, `<h1>`, `<th>` and
  most of what markdown makes, so that a sanitized answer would read "&lt;p&gt;..."; this one
  keeps what markdown makes (paragraphs, headings, lists, tables, code, emphasis, block
  quotes, images inlined as data), the kit's own schedule pictures (inline SVG: shapes, text,
  tooltips and inline styles, nothing else), and drops everything else: scripts (their text
  stays, as text), event handlers, frames, forms, links other than http(s), mailto and
  in-page, images from elsewhere (their alt text stays), styles that fetch (`url(...)`) or
  position, ids (formgrader finds its score boxes by id: a student's `id` could take one over)
  and class names other than syntax highlighting's and the pictures'.
- `formgrade_csp` gives the content security policy of the kit's formgrade page: formgrader's
  own script files and the page's own inline script (by its hash) run; nothing else does.
  `FEEDBACK_CSP` is the feedback page's: no script at all, nothing fetched (the class
  report's policy, `graders.report.CSP`, with no `<base>` and no form either).

Math: the course's notebooks hold none; a student's `$x^2$` stays readable as TeX (no
MathJax, which would be a script from a CDN).
"""
from __future__ import annotations

import base64
import hashlib
import re

import bleach
from bleach import html5lib_shim
from bleach.css_sanitizer import ALLOWED_CSS_PROPERTIES, ALLOWED_SVG_PROPERTIES, CSSSanitizer

FEEDBACK_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
"""The feedback page: no script, no request (pictures are inline data); what it holds, nothing else."""

MARKDOWN_TAGS = frozenset({
    "a", "abbr", "b", "blockquote", "br", "caption", "code", "dd", "del", "details", "div", "dl", "dt", "em",
    "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "ins", "kbd", "li", "mark", "ol", "p", "pre", "q", "s",
    "samp", "small", "span", "strike", "strong", "sub", "summary", "sup", "table", "tbody", "td", "tfoot", "th",
    "thead", "tr", "u", "ul", "var",
})
"""What nbconvert's markdown makes, and the plain formatting tags a student may type."""
SVG_TAGS = frozenset({"svg", "g", "rect", "path", "polygon", "polyline", "line", "circle", "ellipse", "text",
                      "tspan", "title"})
"""The shapes of the kit's schedule pictures (`assignments.schedule`): no `use`, `image`, `a`,
`foreignObject`, `style`, `animate` or `set`, which can fetch, link or change attributes."""
SVG_ATTRIBUTES = frozenset({"xmlns", "viewBox", "width", "height", "x", "y", "x1", "x2", "y1", "y2", "cx", "cy",
                            "r", "rx", "ry", "d", "points", "transform", "text-anchor", "role", "aria-label", "style"})
CLASSES = frozenset({"highlight", "anchor-link", "kit-schedule-figure", "kit-schedule", "arrow", "group",
                     "collective", "tile", "bar", "timeline", "program", "note"})
"""Class names kept: syntax highlighting's blocks and heading links, the schedule pictures'."""
HIGHLIGHT_CLASS = re.compile(r"[a-z]{1,3}[0-9]?|hl-[a-z0-9_+-]+")
"""Syntax highlighting's token classes ("k", "nf", "s1", "err") and its block's language
("hl-ipython3"): none of Bootstrap's layout classes (a student's `navbar-fixed-top` could lay a
fake bar over formgrader's)."""
IMAGE_DATA = re.compile(r"data:image/(png|jpeg|gif|webp|svg\+xml);base64,[A-Za-z0-9+/=\s]*", re.I)
"""An image inlined as data (markdown's attachments, pasted pictures): a picture, never a page.
An SVG shown as an image runs no script and fetches nothing."""
LINK = re.compile(r"(https?://|mailto:|#)", re.I)
FETCHING_STYLE = re.compile(r"url\s*\(|image-set|expression|@import|\\|/\*|<", re.I)
"""A style that could fetch or hide a fetch (CSS escapes, comments); it is dropped whole."""
CSS = CSSSanitizer(allowed_css_properties=ALLOWED_CSS_PROPERTIES | {"margin", "max-width"},
                   allowed_svg_properties=ALLOWED_SVG_PROPERTIES | {"font-family", "font-size", "font-weight", "stroke-dasharray"})
"""Styles of text, tables and pictures; no `position`, `z-index` or `top`: nothing laid over the page."""


def _attribute(tag: str, name: str, value: str) -> bool:
    """Whether `tag` keeps attribute `name` with `value` (bleach asks once per attribute)."""
    if name == "class":
        return all(c in CLASSES or HIGHLIGHT_CLASS.fullmatch(c) for c in value.split())
    if name == "style":
        return not FETCHING_STYLE.search(value)
    if name == "title":
        return True
    if tag == "a":
        return name == "href" and bool(LINK.match(value.strip()))
    if tag == "img":
        return (name in ("alt", "width", "height")
                or name == "src" and bool(IMAGE_DATA.fullmatch(value.strip())))
    if tag in ("td", "th"):
        return name in ("align", "colspan", "rowspan")
    if tag in SVG_TAGS:
        return name in SVG_ATTRIBUTES or name.startswith("data-")
    return False


class _DropWhatIsLeftEmpty(html5lib_shim.Filter):
    """After sanitizing: an image whose source went (a web address, `src=x`) becomes its alt
    text, and an SVG left with nothing inside (`<svg onload=...>`) goes, instead of a broken
    image or a blank 300x150 box in the page."""

    def __iter__(self):
        svg: list[dict] = []  # the tokens of an SVG being read
        depth = 0
        for token in super().__iter__():
            kind, name = token["type"], token.get("name")
            if kind == "EmptyTag" and name == "img" and (None, "src") not in token["data"]:
                alt = token["data"].get((None, "alt"), "")
                token = {"type": "Characters", "data": alt}
                if not alt:
                    continue
            if name == "svg" and kind in ("StartTag", "EndTag"):
                depth += 1 if kind == "StartTag" else -1
            if depth or svg:
                svg.append(token)
                if depth == 0:
                    if any(t["type"] not in ("SpaceCharacters",) and t.get("name") != "svg" for t in svg):
                        yield from svg
                    svg = []
                continue
            if kind == "EmptyTag" and name == "svg":
                continue
            yield token
        yield from svg  # an SVG never closed: as it came


_CLEANER = bleach.Cleaner(tags=MARKDOWN_TAGS | SVG_TAGS, attributes=_attribute,
                          protocols=["http", "https", "mailto", "data"], strip=True, strip_comments=True,
                          css_sanitizer=CSS, filters=[_DropWhatIsLeftEmpty])


def clean_html(html) -> str:
    """`html` with only what the module's docstring lists kept: safe to put in a page as it is.
    Tags not kept are dropped and their text kept as text (`<script>x</script>` reads "x")."""
    html = html.decode() if isinstance(html, bytes) else str(html)
    return _CLEANER.clean(html)


def csp_hash(script: str) -> str:
    """A content security policy's source for exactly this inline script ('sha256-...')."""
    digest = hashlib.sha256(str(script).encode()).digest()
    return f"'sha256-{base64.b64encode(digest).decode()}'"


def formgrade_csp(script: str) -> str:
    """formgrader's submission page: its own script files (same origin) and this inline
    script run; no other inline script or event handler, nothing from another origin, no
    frame, no plugin, no `<base>`; styles and pictures from the server or inline."""
    return (f"default-src 'none'; script-src 'self' {csp_hash(script)}; style-src 'self' 'unsafe-inline'; "
            "img-src 'self' data:; font-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'")
