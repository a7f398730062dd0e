# The course's grading settings (graders.settings.Limits), read by `python -m graders`,
# `graders.batch`, the pytest graders and the Gradescope bundle, and loaded by
# nbgrader_config.py, so `nbgrader autograde` grades with them too. Each is also a command-line
# flag (--submission-timeout 600). The defaults are shown; uncomment a line to change one.
c = get_config()  # noqa: F821

# c.Limits.cell_timeout = 60.0          # seconds one notebook cell (or a .py module) may run
# c.Limits.case_timeout = 60.0          # seconds tracing and exporting one case may take
# c.Limits.run_timeout = 60.0           # seconds compiling and running one case may take
# c.Limits.stall_timeout = 120.0        # seconds a worker may make no progress
# c.Limits.submission_timeout = 900.0   # seconds the whole grading of one submission may take
# c.Limits.memory_gib = 3.0             # memory of each sandboxed worker, all of it
# c.Limits.tmp_mib = 512                # each of its /tmp, scratch folder and /dev/shm
# c.Limits.processes = 512              # processes and threads of each worker
# c.Limits.max_strikes = 2              # failed cases of a function before the rest are skipped
# c.Limits.judges = 0                   # judges per grading (0: one per core, at most 2)
# c.Limits.submission_mib = 32          # size of a submission (.ipynb or .py), every route
# c.Limits.notebook_depth = 64          # JSON nesting of a submitted notebook (Jupyter's: about 7)
# c.Limits.notebook_nodes = 100_000     # JSON values of a submitted notebook (the course's: about 2,000)
# c.Limits.nbgrader_memory_gib = 2.0    # memory of `nbgrader autograde`'s own process (0: no bound)
# c.Limits.sandbox = "auto"             # "auto", "bubblewrap", "uid" or "none"
