"""The preprocessor lists of the course's nbgrader commands, in the order they must run.

``autograder.course.configure`` (called by ``assignments/nbgrader_config.py``) installs them; the order is the design:

* autograde: execute in the confined kernel (:class:`~autograder.confine.execute.SafeExecute`), then
  replace every graded cell's outputs with the verdict computed here (:class:`ExternalVerdict`),
  then make the notebook inert (:class:`SanitizeOutputs`: no script or active HTML from the student
  reaches formgrader, which renders the autograded notebook written at the end of this list), then
  nbgrader's own steps (cut long output, save the grades, late penalties, metadata check), and last each
  written answer's rubric beside it for formgrader (:mod:`autograder.verdict.rubrics`).
  The verdict must come right after execution, before anything reads a score; sanitising comes after
  the verdict (which reads the kernel's raw record outputs) and keeps errors as errors, so the grades
  saved later are the verdict's;
* feedback: the graders' rubrics out, nbgrader's grades, the lateness note of a late or extended submission, the decisions on
  regrade requests under their cells, styling, then strip
  the hidden tests again (nbgrader puts them back into the autograded notebook by design, nbgrader
  issue #917), then sanitise once more, last, so the page is inert even when made from an autograded
  notebook this course's autograde did not write.
"""

from __future__ import annotations

from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import (
    AssignLatePenalties,
    CheckCellMetadata,
    ClearHiddenTests,
    GetGrades,
    IgnorePattern,
    LimitOutput,
    SaveAutoGrades,
)

from autograder.confine.execute import SafeExecute
from autograder.verdict.lateness import LatenessNote
from autograder.verdict.preprocessors import ExternalVerdict
from autograder.verdict.regrades import RegradeNote
from autograder.verdict.rubrics import RubricForGraders, StripRubrics
from autograder.verdict.sanitize import SanitizeOutputs

AUTOGRADE_PREPROCESSORS = [
    SafeExecute,
    ExternalVerdict,
    SanitizeOutputs,
    IgnorePattern,
    ClearMetadataPreprocessor,
    LimitOutput,
    SaveAutoGrades,
    AssignLatePenalties,
    CheckCellMetadata,
    RubricForGraders,
]
FEEDBACK_PREPROCESSORS = [
    StripRubrics,
    GetGrades,
    LatenessNote,
    RegradeNote,
    CSSHTMLHeaderPreprocessor,
    ClearHiddenTests,
    SanitizeOutputs,
]
