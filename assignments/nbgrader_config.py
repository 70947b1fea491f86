"""nbgrader configuration of the course. Run nbgrader from this folder (the course root).

This file holds the instructor's settings; ``configure(c, here)`` adds the course's machinery (grading
pipeline, collectors, the term's late policy, offline formulas: autograder/course/configure.py). Sources are
MyST markdown (``source/<section>/<exercise>.md``); ``python -m autograder build`` turns them into the
``.ipynb`` files nbgrader reads.
"""

import os

from autograder.course import configure

c = get_config()  # noqa: F821 (provided by nbgrader)
configure(c, os.path.dirname(os.path.abspath(__file__)))

c.CourseDirectory.course_id = "s04_diffsim"

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
# Flooded output is cut to this many lines per cell (nbgrader's LimitOutput).
c.LimitOutput.max_lines = 200
c.LimitOutput.max_traceback = 50

# Collecting from an nbgrader exchange checks that a submission's files belong to the student it names
# (autograder/ops/exchange_collect.py). On a hub where all students share one Unix account, uncomment:
# c.ExchangeCollect.check_owner = False
