"""nbgrader configuration of the course. Run nbgrader from this folder (the course root).

Sources are MyST markdown (``source/<section>/<exercise>.md``, readable diffs);
``python -m autograder build`` turns them into the ``.ipynb`` files nbgrader reads.
"""

from nbconvert.preprocessors import ClearMetadataPreprocessor
from nbgrader.preprocessors import (
    AssignLatePenalties, CheckCellMetadata, IgnorePattern, LimitOutput, SaveAutoGrades,
)

from autograder.nbgrader_ext import ExternalVerdict, SafeExecute

c = get_config()  # noqa: F821 (provided by nbgrader)

c.CourseDirectory.course_id = "s04_diffsim"
# The .md sources stay out of the release; nbgrader works on the generated notebooks.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "*.md"]

c.ClearSolutions.code_stub = {"python": "# 在这里写你的代码\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "（在这里写下你的回答）"

# Per-cell limit while grading; JAX compiles on first call, so leave room for it.
c.Execute.timeout = 120
c.Execute.interrupt_on_timeout = True
# On a loaded grading machine output can arrive seconds after a cell's reply; nbgrader's default
# (wait 4 s, then fail the WHOLE submission) turned slowness into a lost grade. Wait longer, never fail.
c.Execute.iopub_timeout = 30
c.Execute.raise_on_iopub_timeout = False
# nbgrader's autograde pipeline with Execute replaced: a kernel that dies (os._exit, segfault,
# memory limit) costs the cells after it, not the whole submission; and the graded cells are
# scored OUTSIDE the student's kernel from the results it recorded (see autograder/nbgrader_ext.py).
c.Autograde.autograde_preprocessors = [
    SafeExecute, ExternalVerdict, IgnorePattern, ClearMetadataPreprocessor, LimitOutput, SaveAutoGrades,
    AssignLatePenalties, CheckCellMetadata,
]
# Flooded output is cut to this many lines per cell (nbgrader's LimitOutput).
c.LimitOutput.max_lines = 200
c.LimitOutput.max_traceback = 50

# `nbgrader zip_collect` (LMS downloads, see `python -m autograder collect`): which student a file
# belongs to is read from its path; the rule and examples are in autograder/collect.py.
from autograder.collect import NAMED_REGEXP  # noqa: E402

c.FileNameCollectorPlugin.named_regexp = NAMED_REGEXP

# Feedback HTML is made from the autograded notebook, where nbgrader has put the hidden tests back
# (by design, nbgrader issue #917): strip them again so that feedback shows the results, not the tests.
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor  # noqa: E402
from nbgrader.preprocessors import ClearHiddenTests, GetGrades  # noqa: E402

c.GenerateFeedback.preprocessors = [GetGrades, CSSHTMLHeaderPreprocessor, ClearHiddenTests]
