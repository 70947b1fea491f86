"""The gradebook on a real PostgreSQL server: class run, summary, reports, feedback and export.

A scratch course whose ``nbgrader_config.py`` also sets ``CourseDirectory.db_url`` from the
environment variable ``S04_GRADEBOOK_URL`` (as the book page "教师指南" shows: the password is
never written into the course) is pointed at a throw-away server (tests/postgres_server.py: Debian's
``postgresql``, password authentication only). Two pseudo-students of section s04_6 (the cheapest
section to grade; its three notebooks that grade in 1-2 s each, all with automatic points), ``reference`` and
``blank`` (autograder.ops.selftest.hand_in), go through the class run with two workers, then
``nbgrader generate_feedback``, ``nbgrader export`` and the reports, each read back from the server.
One module fixture does all the nbgrader runs: about a minute on two cores.
"""

import csv
from pathlib import Path

import postgres_server
import psycopg2
import pytest
from sqlalchemy.engine import make_url

from autograder.confine.launcher import ENV_ALLOWED, ENV_ALLOWED_PREFIXES
from autograder.ops.classrun import grade_class, summary_lines
from autograder.ops.nbgrader_run import gradebook_scores, gradebook_url, nbgrader
from autograder.ops.reports import make_reports
from autograder.ops.selftest import hand_in, scratch_course
from postgres_server import postgres  # noqa: F401 (the session fixture)

# the module fixture grades once, on one xdist worker (it would otherwise run on each)
pytestmark = [
    pytest.mark.nbgrader,
    pytest.mark.slow,
    pytest.mark.xdist_group("postgres"),
]

ROOT = Path(__file__).resolve().parents[1]
SECTION = "s04_6"
ENV = "S04_GRADEBOOK_URL"
#: appended to the course's nbgrader_config.py: the snippet of book/instructors.md
DB_CONFIG = f"""
import os

# the gradebook is a PostgreSQL server; its URL, password included, comes from the environment
if "{ENV}" in os.environ:
    c.CourseDirectory.db_url = os.environ["{ENV}"]
"""


@pytest.fixture(scope="module")
def graded(postgres, tmp_path_factory):  # noqa: F811 (the fixture)
    tmp = tmp_path_factory.mktemp("postgres_gradebook")
    course = scratch_course(tmp / "course", ROOT / "assignments")
    with open(course / "nbgrader_config.py", "a", encoding="utf-8") as f:
        f.write(DB_CONFIG)
    with pytest.MonkeyPatch.context() as env:
        env.setenv(ENV, postgres.url)
        handed_in = hand_in(SECTION, course, wrong_answers=False, exercises=["s04_6_ex1", "s04_6_ex2", "s04_6_ex3"])
        results = grade_class(course, [SECTION], workers=2, progress=False)
        nbgrader(["generate_feedback", SECTION, "--force"], course)
        nbgrader(["export", "--to", str(tmp / "grades.csv")], course)
        yield course, handed_in, results, tmp


def _grade_rows(postgres):  # noqa: F811
    """``{student: (grade rows, sum of automatic scores)}`` of s04_6, straight from the server."""
    conn = psycopg2.connect(**{**postgres.admin_dsn, "dbname": "s04_diffsim"})
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT sa.student_id, count(*), sum(coalesce(g.auto_score, 0)) FROM grade g"
                " JOIN submitted_notebook sn ON g.notebook_id = sn.id"
                " JOIN submitted_assignment sa ON sn.assignment_id = sa.id"
                " JOIN assignment a ON sa.assignment_id = a.id"
                " WHERE a.name = %s GROUP BY sa.student_id",
                (SECTION,),
            )
            return {student: (n, float(total)) for student, n, total in cur.fetchall()}
    finally:
        conn.close()


def test_class_run_writes_to_the_server(graded, postgres):  # noqa: F811
    course, handed_in, results, _ = graded
    assert {r.student: r.status for r in results} == {"reference": "graded", "blank": "graded"}, results
    assert gradebook_url(course) == postgres.url
    scores = gradebook_scores(course, SECTION)
    assert set(scores) == {"reference", "blank"}
    for exercise in handed_in["reference"]:
        got, total = scores["reference"][exercise]["auto"]
        assert got == total > 0, (exercise, got, total)
        assert scores["blank"][exercise]["auto"] == (0, total), exercise
    auto_max = sum(v["auto"][1] for v in scores["reference"].values())  # the section's, s04_6_ex4 included
    rows = _grade_rows(postgres)
    assert set(rows) == {"reference", "blank"}
    assert rows["reference"][1] == sum(scores["reference"][e]["auto"][1] for e in handed_in["reference"])
    assert rows["blank"][1] == 0
    assert rows["reference"][0] == rows["blank"][0] > len(handed_in["reference"])  # every graded cell has its row
    assert not list(course.rglob("gradebook.db")), "nbgrader fell back to SQLite"
    lines = summary_lines(course, results)
    reference = next(ln for ln in lines if "reference" in ln)
    blank = next(ln for ln in lines if "blank" in ln)
    handed = sum(scores["reference"][e]["auto"][0] for e in handed_in["reference"])
    assert f"{handed:6.1f}/{auto_max:<6.1f}" in reference and f"{0:6.1f}/{auto_max:<6.1f}" in blank, lines
    assert lines[-1].startswith("共 2 份提交：评分 2，"), lines


def test_feedback_reports_and_export_read_the_server(graded):
    course, handed_in, _, tmp = graded
    scores = gradebook_scores(course, SECTION)
    for student in ("reference", "blank"):
        for exercise in handed_in[student]:
            page = course / "feedback" / student / SECTION / f"{exercise}.html"
            assert "通过" in page.read_text(encoding="utf-8"), page  # the graded cells' Chinese feedback
    written, problems = make_reports(course, [SECTION], tmp / "reports")
    assert problems == [] and {p.name for p in written} == {"scores.csv", "overview.png"}
    with open(tmp / "reports" / "scores.csv", encoding="utf-8-sig") as f:
        table = {(r["student"], r["exercise"]): r for r in csv.DictReader(f)}
    assert set(table) == {(s, e) for s in ("reference", "blank") for e in scores["reference"]}
    for (student, exercise), row in table.items():  # the notebook not handed in has its row too
        assert row["status"] == ("已评分" if exercise in handed_in[student] else "未交此题"), (student, exercise)
        assert (float(row["auto_score"]), float(row["auto_max"])) == scores[student][exercise]["auto"]
    with open(tmp / "grades.csv", encoding="utf-8") as f:
        exported = {r["student_id"]: r for r in csv.DictReader(f) if r["assignment"] == SECTION}
    auto = {s: sum(v["auto"][0] for v in scores[s].values()) for s in scores}
    maximum = sum(v["auto"][1] + v["manual_max"] for v in scores["reference"].values())
    assert set(exported) == {"reference", "blank"}
    for student in exported:  # the written answers await manual grading: they count 0
        assert float(exported[student]["score"]) == auto[student], exported[student]
        assert float(exported[student]["max_score"]) == maximum


def test_the_password_stays_out_of_the_course_and_the_kernel(graded, postgres):  # noqa: F811
    course, _, _, _ = graded
    password = make_url(postgres.url).password
    assert len(password) > 20
    assert ENV not in ENV_ALLOWED and not ENV.startswith(ENV_ALLOWED_PREFIXES)  # the grading kernel drops it
    assert password not in (course / "nbgrader_config.py").read_text(encoding="utf-8")
    for folder in ("autograded", "feedback", "release"):  # nothing a student receives or ran in
        for path in (course / folder).rglob("*"):
            assert not path.is_file() or password.encode() not in path.read_bytes(), path


def test_the_server_refuses_connections_without_a_password(postgres, tmp_path):  # noqa: F811
    # grading kernels can reach local Unix sockets (book page "教师指南"): no trust, no peer
    for user, dbname in (("postgres", "postgres"), ("grader", "s04_diffsim")):
        with pytest.raises(psycopg2.OperationalError, match="no password supplied"):
            psycopg2.connect(
                host=str(postgres.socket_dir),
                port=postgres.port,
                user=user,
                dbname=dbname,
                passfile=str(tmp_path / "no-pgpass"),
                connect_timeout=10,
            )


def test_without_postgresql_the_test_skips_or_fails_in_ci(tmp_path, monkeypatch):
    for version, programs in (("9.6", postgres_server.PROGRAMS), ("15", postgres_server.PROGRAMS), ("16", ["initdb"])):
        (tmp_path / version / "bin").mkdir(parents=True)
        for name in programs:
            (tmp_path / version / "bin" / name).touch()
    assert postgres_server.find_bin_dir(tmp_path) == tmp_path / "15" / "bin"  # newest complete one, by number
    monkeypatch.setattr(postgres_server, "PG_ROOT", tmp_path / "none")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception), postgres_server.postgres_server():
        pass
    monkeypatch.setenv("CI", "1")
    with pytest.raises(pytest.fail.Exception, match="CI is set"), postgres_server.postgres_server():
        pass
