"""pytest set-up for the hidden graders (`graders/test_<assignment>.py`): see
`graders.pytest_plugin`. Run them with ``python -m pytest graders/test_problem1.py --submission PATH``."""
from graders.pytest_plugin import (  # noqa: F401  (hooks and fixtures pytest finds here)
    grading, judged, pytest_addoption, pytest_collection_finish, pytest_collection_modifyitems,
    pytest_configure, pytest_runtest_makereport, pytest_sessionfinish)
