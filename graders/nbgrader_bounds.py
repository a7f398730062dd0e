"""nbgrader's own process, bounded: what `nbgrader autograde` reads, and the memory it may hold.

nbgrader parses and copies every submitted notebook in the instructor's process, before the
kit's preprocessors (and their sandbox) see it, and one process grades the whole class. So,
configured in `nbgrader_config.py`:
- `BoundedNotebookExporter` (`c.Autograde.exporter_class`) reads each notebook's bytes, at most
  `c.Limits.submission_mib` of them, and checks them (`graders.notebook_bounds.check_notebook`:
  depth and JSON values) before nbformat parses them. A notebook beyond a bound fails for that
  student only (nbgrader goes on with the others, and says at the end which failed), with the
  bound and the fix in the log.
- When the process is the `nbgrader autograde` command, the exporter also moves it into a
  memory cgroup of its own, bounded at `c.Limits.nbgrader_memory_gib`
  (`graders.cgroups.bound_process`; its sandboxed workers keep their own groups beside it), and
  logs where, or why none can be made (then it runs unbounded, as before). Formgrader's
  autograde runs the same exporter inside the instructor's Jupyter server, whose memory is never
  bounded: only the command is.
"""
from __future__ import annotations

import nbformat
from nbconvert.exporters import NotebookExporter

from .notebook_bounds import FIX, NotebookTooLarge, check_notebook
from .settings import Limits


def is_autograde_command() -> bool:
    """Is this process the `nbgrader autograde` command line (not formgrader in a Jupyter
    server, nor another nbgrader command)? The running traitlets application says."""
    from nbgrader.apps import AutogradeApp
    from traitlets.config import Application

    return Application.initialized() and isinstance(Application.instance(), AutogradeApp)


class BoundedNotebookExporter(NotebookExporter):
    """nbconvert's notebook exporter, reading a notebook only within the course's bounds
    (`Limits`: `submission_mib`, `notebook_depth`, `notebook_nodes`), checked on its bytes
    before nbformat parses them; as `nbgrader autograde`, first bounding its own memory."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if is_autograde_command():
            self.bound_process()

    def limits(self) -> Limits:
        return Limits(config=self.config)

    def bound_process(self) -> None:
        from .cgroups import bound_process

        limits = self.limits()
        if not limits.nbgrader_memory_gib:
            self.log.info("nbgrader autograde's memory is not bounded (c.Limits.nbgrader_memory_gib = 0)")
            return
        bounded, where = bound_process(limits.nbgrader_memory_bytes)
        if bounded:
            self.log.info("nbgrader autograde holds at most %g GiB (c.Limits.nbgrader_memory_gib): memory cgroup %s",
                          limits.nbgrader_memory_gib, where)
        else:
            self.log.warning("nbgrader autograde runs without a memory bound of its own "
                             "(c.Limits.nbgrader_memory_gib): %s; each notebook is still bounded before it "
                             "is read (c.Limits.notebook_nodes)", where)

    def from_file(self, file_stream, resources=None, **kw):
        """`file_stream`'s notebook, read at most `submission_mib` at a time and checked before
        it is parsed; `NotebookTooLarge` (logged with the bound and the fix) otherwise."""
        limits = self.limits()
        name = getattr(file_stream, "name", "the notebook")
        text = file_stream.read(limits.submission_bytes + 1)  # characters: at least as many bytes
        data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
        try:
            if len(data) > limits.submission_bytes:
                raise NotebookTooLarge(f"{name} is larger than {limits.submission_mib} MiB "
                                       f"(c.Limits.submission_mib); {FIX}")
            check_notebook(data, limits, name)
        except NotebookTooLarge as e:
            self.log.error("not reading %s: %s", name, e)
            raise
        return self.from_notebook_node(nbformat.reads(text, as_version=4), resources=resources, **kw)
