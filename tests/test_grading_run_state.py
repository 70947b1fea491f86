"""Grading state belongs to one autograde run, not to the process (autograder.confine.execute.GradingRun).

Formgrader's "autograde" button runs nbgrader inside the Jupyter server, which lives for days; a TA may
regrade one student many times. Every regrade must start with the student's full time budget, while the
notebooks of one run still share the section's budget.
"""

import sys
import time

import pytest
from nbgrader.apps.api import NbGraderAPI
from nbgrader.converters.base import BaseConverter
from nbgrader.coursedir import CourseDirectory
from traitlets.config import Configurable
from traitlets.config.loader import PyFileConfigLoader

from autograder.confine.execute import SafeExecute, grading_run, recording_phases
from autograder.ops.nbgrader_run import gradebook_scores
from autograder.ops.selftest import hand_in

pytestmark = [pytest.mark.nbgrader, pytest.mark.slow]

SECTION = "s04_3"
_Exporter = Configurable  # stands for nbconvert's exporter, between a converter and its preprocessors


def test_the_notebooks_of_one_run_share_its_state_and_a_new_run_starts_afresh():
    first, second = BaseConverter(), BaseConverter()
    exporter = _Exporter(parent=first)
    a, b = SafeExecute(parent=exporter), SafeExecute(parent=exporter)  # nbgrader makes one per notebook
    assert grading_run(a) is grading_run(b) is grading_run(SafeExecute(parent=first))
    grading_run(a).spent[("ann", SECTION)] = 100.0
    assert grading_run(SafeExecute(parent=_Exporter(parent=second))).spent == {}
    alone = SafeExecute()
    assert grading_run(alone) is grading_run(alone) and grading_run(alone) is not grading_run(a)


def test_phases_are_recorded_only_where_asked_and_nest():
    from autograder.confine.execute import _add_phase

    _add_phase("kernel", 1.0)  # nobody records: nothing kept anywhere
    with recording_phases() as outer:
        _add_phase("kernel", 1.5)
        with recording_phases() as inner:
            _add_phase("execute", 2.0)
        _add_phase("execute", 0.5)
    assert outer == {"kernel": 1.5, "execute": 0.5} and inner == {"execute": 2.0}


def test_regrading_one_student_again_and_again_in_one_process_keeps_the_marks(released_course, tmp_path, monkeypatch):
    course = released_course(SECTION, tmp_path / "course")
    # the notebooks that grade in 1-2 s each: short regrades, many of them (s04_3_ex2 takes about 10 s)
    notebooks = ["s04_3_ex1", "s04_3_ex3"]
    hand_in(SECTION, course, wrong_answers=False, released=True, exercises=notebooks)
    monkeypatch.chdir(course)
    monkeypatch.setattr(sys, "path", list(sys.path))  # nbgrader puts the course folder first on sys.path

    def api(**safe_execute):
        config = PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()
        for name, value in safe_execute.items():
            setattr(config.SafeExecute, name, value)
        return NbGraderAPI(CourseDirectory(config=config, root=str(course)), config=config)

    def regrade(server):
        result = server.autograde(SECTION, "reference")
        assert result["success"], result.get("log", "")[-3000:]
        return gradebook_scores(course, SECTION)["reference"]

    full = regrade(api())  # also starts the warm zygote
    assert full["s04_3_ex1"]["auto"][0] == full["s04_3_ex1"]["auto"][1] > 0, full  # s04_3_ex3: written answers
    timed = []
    for _ in range(2):
        began = time.monotonic()
        assert regrade(api()) == full
        timed.append(time.monotonic() - began)
    # a budget that the slower of two regrades fits four times over (one regrade on a loaded CI machine once took
    # 2.5 times another), and that eight regrades in a row would spend twice: only a budget carried from one
    # regrade to the next in this process can cost points here
    server = api(submission_budget_s=4 * max(timed))
    for _ in range(8):
        assert regrade(server) == full
