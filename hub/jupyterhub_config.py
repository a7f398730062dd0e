"""A course on one machine: JupyterHub with local users, nbgrader's one-class-one-grader set-up.

    cd /srv/scaling-jax-hub && sudo /opt/scaling-jax/bin/jupyterhub -f /srv/scaling-jax/hub/jupyterhub_config.py

(the README's "A course on JupyterHub" gives every step.)
- Who: local Unix accounts, logging in with their own passwords (PAM). Members of the Unix
  group `scaling-jax-instructors` are instructors, of `scaling-jax-students` students; nobody
  else may log in ($SCALING_JAX_INSTRUCTORS and $SCALING_JAX_STUDENTS name other groups).
- What runs: each user's own JupyterLab, as that user, in their home: `jupyterhub-singleuser`
  of the environment this hub runs in, whose Python is everyone's kernel and the graders'.
- Students get the hand-out's Jupyter settings (`graders/handout.py`): the Assignment List
  only, nbgrader's exchange and course id from this kit's `nbgrader_config.py`, the Submit
  that asks again before handing in an untouched notebook.
- Instructors get formgrader, Create Assignment and Courses; their course folder is
  `~/scaling-jax` ($SCALING_JAX_COURSE, under their home), a copy of the kit, whose own
  `nbgrader_config.py` formgrader loads. Formgrader opens in a browser tab of its own,
  `/user/<name>/formgrader`: JupyterHub 4.1 and later forbid the frame JupyterLab's
  *Nbgrader > Formgrader* panel would show it in (a page of another user's server could
  otherwise drive it), so that menu entry, which would stay blank, is left out.
The users' settings are written when the hub starts, under this environment's
`share/scaling-jax-hub/`, which every user can read.
"""
import grp
import json
import os
import pwd
import sys

KIT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, KIT)
from graders.exchange import UnsafeExchange, require_safe_exchange  # noqa: E402
from graders.handout import KERNEL_CONFIG, course_settings, write_student_config  # noqa: E402

INSTRUCTORS = os.environ.get("SCALING_JAX_INSTRUCTORS", "scaling-jax-instructors")
STUDENTS = os.environ.get("SCALING_JAX_STUDENTS", "scaling-jax-students")
COURSE = os.environ.get("SCALING_JAX_COURSE", "scaling-jax")
ENVIRONMENT_BIN = os.path.dirname(sys.executable)
SETTINGS = os.path.join(sys.prefix, "share", "scaling-jax-hub")

INSTRUCTOR_NBGRADER_CONFIG = """# The instructor's nbgrader: the course folder, whose nbgrader_config.py formgrader loads.
import os

c = get_config()  # noqa: F821
c.CourseDirectory.root = os.path.join(os.path.expanduser("~"), {course!r})
"""


def in_group(user: str, group: str) -> bool:
    try:
        members = grp.getgrnam(group)
        return user in members.gr_mem or pwd.getpwnam(user).pw_gid == members.gr_gid
    except KeyError:
        return False


def write_settings() -> dict[str, str]:
    """Each role's Jupyter settings folder (for JUPYTER_CONFIG_PATH), written afresh."""
    os.makedirs(SETTINGS, mode=0o755, exist_ok=True)
    instructor = os.path.join(SETTINGS, "instructor")
    os.makedirs(instructor, mode=0o755, exist_ok=True)
    with open(os.path.join(instructor, "nbgrader_config.py"), "w") as f:
        f.write(INSTRUCTOR_NBGRADER_CONFIG.format(course=COURSE))
    # No Nbgrader > Formgrader: its panel is a frame JupyterHub forbids, so it would stay blank;
    # no "get notified about news?" question either, as for students.
    os.makedirs(os.path.join(instructor, "labconfig"), mode=0o755, exist_ok=True)
    with open(os.path.join(instructor, "labconfig", "page_config.json"), "w") as f:
        json.dump({"disabledExtensions": {"@jupyter/nbgrader:formgrader": True,
                                          "@jupyterlab/apputils-extension:announcements": True}}, f, indent=2)
    # Every kernel of this environment loads the course's runtime as an IPython extension (the
    # hand-out's own setting; IPython reads no JUPYTER_CONFIG_PATH): a cell run before the set-up
    # cell says to run the set-up cell first.
    ipython = os.path.join(sys.prefix, "etc", "ipython")
    os.makedirs(ipython, mode=0o755, exist_ok=True)
    with open(os.path.join(ipython, "ipython_kernel_config.py"), "w") as f:
        f.write(KERNEL_CONFIG)
    return {"instructor": instructor, "student": write_student_config(os.path.join(SETTINGS, "student"))}


def instructor_uids() -> set[int]:
    """The instructors' user ids: the group's members, and the users whose own group it is."""
    try:
        group = grp.getgrnam(INSTRUCTORS)
    except KeyError:
        return set()
    members = {pwd.getpwnam(name).pw_uid for name in group.gr_mem}
    return members | {user.pw_uid for user in pwd.getpwall() if user.pw_gid == group.gr_gid}


def check_exchange() -> None:
    """Start no course whose exchange a student could rearrange (graders/exchange.py): the
    message lists each problem and the command that mends it."""
    course_id, exchange = course_settings(KIT)
    try:
        require_safe_exchange(exchange, course_id, instructors=instructor_uids())
    except UnsafeExchange as e:
        sys.exit(f"The course hub did not start: {e}")


check_exchange()
ROLE_SETTINGS = write_settings()


def role_settings(spawner) -> None:
    """Before a user's server starts: their role's settings, this environment's commands."""
    role = "instructor" if in_group(spawner.user.name, INSTRUCTORS) else "student"
    spawner.environment["JUPYTER_CONFIG_PATH"] = ROLE_SETTINGS[role]
    # nbgrader runs helpers (alembic) from PATH; bubblewrap (the graders' sandbox) is in /usr/bin.
    spawner.environment["PATH"] = os.pathsep.join([ENVIRONMENT_BIN, "/usr/local/bin", "/usr/bin", "/bin"])


c = get_config()  # noqa: F821
c.JupyterHub.authenticator_class = "pam"
c.PAMAuthenticator.allowed_groups = {INSTRUCTORS, STUDENTS}
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = [os.path.join(ENVIRONMENT_BIN, "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.pre_spawn_hook = role_settings
c.Spawner.http_timeout = 120  # a first start on a busy machine
