"""nbgrader configuration of the course. Run nbgrader from this folder (the course root).

Sources are MyST markdown (``source/<section>/<exercise>.md``, readable diffs);
``python -m autograder build`` turns them into the ``.ipynb`` files nbgrader reads.
"""

import os

from autograder.ops.nbgrader_speedups import install as install_speedups
from autograder.verdict.pipeline import AUTOGRADE_PREPROCESSORS, FEEDBACK_PREPROCESSORS

c = get_config()  # noqa: F821 (provided by nbgrader)

# nbgrader without its `alembic heads` process per new gradebook and its schema check per cell (same decisions)
install_speedups()

c.CourseDirectory.course_id = "s04_diffsim"
# The .md sources stay out of the release; nbgrader works on the generated notebooks.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "*.md"]

c.ClearSolutions.code_stub = {"python": "# 在这里写你的代码\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "（在这里写下你的回答）"

# Per-cell limit while grading; JAX compiles on first call, so leave room for it. A student who never calls
# jax.jit needs up to 58 s in one graded cell (s04_9_ex2; benchmarks/run_budget.py), so the limit is twice
# that; the per-notebook budget still caps what a looping notebook costs. Per-notebook and per-submission
# budgets: confine/limits.py.
c.Execute.timeout = 120
c.Execute.interrupt_on_timeout = True
# On a loaded grading machine output can arrive seconds after a cell's reply; nbgrader's default
# (wait 4 s, then fail the WHOLE submission) turned slowness into a lost grade. Wait longer, never fail.
c.Execute.iopub_timeout = 30
c.Execute.raise_on_iopub_timeout = False
# nbgrader's autograde pipeline with Execute replaced: student code runs in the confined grading
# kernel, a kernel that dies costs the cells after it, not the whole submission, and the graded
# cells are scored OUTSIDE the student's kernel (the list and its order: autograder/verdict/pipeline.py).
c.Autograde.autograde_preprocessors = AUTOGRADE_PREPROCESSORS
# The JAX compilation cache `python -m autograder warm-cache` fills and seals; grading kernels only read it,
# after its manifest is checked (autograder/confine/compile_cache.py). Missing or tampered: graded without it.
c.SafeExecute.compile_cache = os.path.join(os.path.dirname(os.path.abspath(__file__)), ".grading", "compile-cache")
# Flooded output is cut to this many lines per cell (nbgrader's LimitOutput).
c.LimitOutput.max_lines = 200
c.LimitOutput.max_traceback = 50

# `nbgrader collect` from an exchange (and formgrader's collect button): whose work a submission is and when it
# was handed in come from its files' owner and change times, not from the folder name or timestamp.txt a
# student can write; impostors and backdated claims are reported and journalled (autograder/ops/exchange_collect.py).
# On a hub where all students share one Unix account, add: c.ExchangeCollect.check_owner = False
c.ExchangeFactory.collect = "autograder.ops.exchange_collect.VettedCollect"

# `nbgrader zip_collect` (LMS downloads, see `python -m autograder collect`): which student a file
# belongs to is read from its path; the rule and examples are in autograder/ops/collect.py.
from autograder.ops.collect import EXTRACTOR, NAMED_REGEXP  # noqa: E402

c.FileNameCollectorPlugin.named_regexp = NAMED_REGEXP
# Students put files into the download: it is unpacked member by member, rejecting zip bombs, paths
# out of the folder, links and corrupt or encrypted archives (autograder/ops/archives.py).
c.ZipCollectApp.extractor_plugin = EXTRACTOR

# The term (assignments/term.toml): nbgrader's AssignLatePenalties applies the late policy in every autograde,
# and the feedback of a late or extended submission says how late it was and what it cost (autograder/ops/term.py).
from autograder.ops.term import load_term  # noqa: E402
from autograder.verdict.lateness import TermLatePolicy  # noqa: E402

_TERM = load_term(os.path.dirname(os.path.abspath(__file__)))
c.AssignLatePenalties.plugin_class = TermLatePolicy
c.TermLatePolicy.percent_per_day = _TERM.policy.percent_per_day
c.TermLatePolicy.cap_percent = _TERM.policy.cap_percent
c.TermLatePolicy.hard_deadline_days = _TERM.policy.hard_deadline_days
c.LatenessNote.utc_offset_hours = _TERM.utc_offset_hours

# Formulas render in formgrader and in the feedback HTML with no network: MathJax 3 from the package the book
# vendors, inlined by the course's override of nbconvert's mathjax template (autograder/verdict/mathjax.py).
import nbgrader  # noqa: E402

from autograder.verdict.mathjax import TEMPLATES  # noqa: E402

c.HTMLExporter.extra_template_basedirs = [
    os.path.join(os.path.dirname(nbgrader.__file__), "server_extensions", "formgrader", "templates"),
    str(TEMPLATES),
]
c.HTMLExporter.filters = {"offline_mathjax": "autograder.verdict.mathjax.offline_mathjax"}

# Feedback HTML is made from the autograded notebook, where nbgrader has put the hidden tests back
# (by design, nbgrader issue #917): the feedback pipeline strips them again.
c.GenerateFeedback.preprocessors = FEEDBACK_PREPROCESSORS
