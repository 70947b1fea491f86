"""The course's machinery, put into an nbgrader config in one call: ``configure(c, here)``.

``assignments/nbgrader_config.py`` holds the instructor's settings (course id, time limits, stubs, an exchange
root, a gradebook server) and this one call; everything that makes grading this course's grading lives here:

* the autograde and feedback pipelines (confined kernels, scoring outside the student's kernel, hidden tests
  stripped from feedback: :mod:`autograder.verdict.pipeline`);
* the sealed JAX compilation cache grading kernels read (:mod:`autograder.confine.compile_cache`);
* collecting: from an exchange with owner and time checked (:mod:`autograder.ops.exchange_collect`), from an
  LMS download with the course's file-name rule and safe extractor (:mod:`autograder.ops.collect`);
* the term: the late policy of ``term.toml`` for nbgrader's ``AssignLatePenalties``, the lateness note;
* offline MathJax in formgrader and feedback (:mod:`autograder.verdict.mathjax`);
* nbgrader's two patched costs (:mod:`autograder.ops.nbgrader_patches`), each installed only while what it
  assumes about nbgrader's code holds.

The instructor's settings may come before or after the call; a setting made after it wins.
"""

from __future__ import annotations

import os
from pathlib import Path

#: the collect plugin of every nbgrader exchange command (``nbgrader collect``, formgrader's button)
EXCHANGE_COLLECT = "autograder.ops.exchange_collect.VettedCollect"


def configure(c, here) -> None:
    """Configure nbgrader config ``c`` for the course folder ``here`` (the folder of ``nbgrader_config.py``)."""
    import nbgrader

    from autograder.ops.collect import EXTRACTOR, NAMED_REGEXP
    from autograder.ops.nbgrader_patches import install
    from autograder.course.term import load_term
    from autograder.verdict.lateness import TermLatePolicy
    from autograder.verdict.mathjax import TEMPLATES
    from autograder.verdict.pipeline import AUTOGRADE_PREPROCESSORS, FEEDBACK_PREPROCESSORS

    here = Path(here).resolve()
    install()

    # The .md sources stay out of the release; nbgrader works on the generated notebooks.
    c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "*.md"]
    # nbgrader's autograde pipeline with Execute replaced: student code runs in the confined grading kernel, a
    # kernel that dies costs the cells after it, not the whole submission, and the graded cells are scored
    # OUTSIDE the student's kernel (the list and its order: autograder/verdict/pipeline.py).
    c.Autograde.autograde_preprocessors = AUTOGRADE_PREPROCESSORS
    # Feedback HTML is made from the autograded notebook, where nbgrader has put the hidden tests back
    # (by design, nbgrader issue #917): the feedback pipeline strips them again.
    c.GenerateFeedback.preprocessors = FEEDBACK_PREPROCESSORS
    # The compilation cache `python -m autograder warm-cache` fills and seals; kernels only read it, after
    # its manifest is checked. Missing or tampered: graded without it.
    c.SafeExecute.compile_cache = str(here / ".grading" / "compile-cache")

    # Collecting: owner and time from evidence a student cannot write; LMS downloads by the course's rule.
    c.ExchangeFactory.collect = EXCHANGE_COLLECT
    c.FileNameCollectorPlugin.named_regexp = NAMED_REGEXP
    c.ZipCollectApp.extractor_plugin = EXTRACTOR

    # The term (term.toml): nbgrader's AssignLatePenalties applies the late policy in every autograde, and the
    # feedback of a late or extended submission says how late it was and what it cost.
    term = load_term(here)
    c.Course.term = term  # kept: a Course built from this config takes it rather than reading term.toml again
    c.AssignLatePenalties.plugin_class = TermLatePolicy
    c.TermLatePolicy.percent_per_day = term.policy.percent_per_day
    c.TermLatePolicy.cap_percent = term.policy.cap_percent
    c.TermLatePolicy.hard_deadline_days = term.policy.hard_deadline_days
    c.LatenessNote.utc_offset_hours = term.utc_offset_hours

    # Formulas render in formgrader and in the feedback HTML with no network: MathJax 3 from the package the
    # book vendors, inlined by the course's override of nbconvert's mathjax template.
    c.HTMLExporter.extra_template_basedirs = [
        os.path.join(os.path.dirname(nbgrader.__file__), "server_extensions", "formgrader", "templates"),
        str(TEMPLATES),
    ]
    c.HTMLExporter.filters = {"offline_mathjax": "autograder.verdict.mathjax.offline_mathjax"}
