"""nbgrader configuration of the course. Run nbgrader from this folder (the course root).

Sources are MyST markdown (``source/<section>/<exercise>.md``, readable diffs);
``python -m autograder build`` turns them into the ``.ipynb`` files nbgrader reads.
"""

c = get_config()  # noqa: F821 (provided by nbgrader)

c.CourseDirectory.course_id = "s04_diffsim"
# The .md sources stay out of the release; nbgrader works on the generated notebooks.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "*.md"]

c.ClearSolutions.code_stub = {"python": "# 在这里写你的代码\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "（在这里写下你的回答）"

# Per-cell limit while grading; JAX compiles on first call, so leave room for it.
c.Execute.timeout = 120
c.Execute.interrupt_on_timeout = True
