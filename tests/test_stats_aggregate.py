"""``stats`` without nbgrader: the diagnoses journal, the aggregation on hand-made records, the CSV, the table,
the figure and the command's refusals. The same counts on a class graded by nbgrader: tests/test_stats.py."""

import csv

import numpy as np
import pytest

from autograder.ops import cli
from autograder.ops.stats import aggregate, class_stats, csv_rows, table_lines, write_csv
from autograder.ops.stats_figure import stats_figure
from autograder.verdict import diagnoses, journal
from autograder.verdict.diagnoses import CellDiagnosis
from course_check.compare import compare
from course_check.protocol import MIME, encode
from course_check.scoring import score_results

CATALOGUE = {
    "ex.f": {
        "off_by_one": "差了一步：循环次数不对。\n第二行不进报告。",
        "explicit": "用了显式欧拉。",
        "never": "没人犯。",
    },
}


def cell(earned, *cases, problem="", points=3.0, check="ex.f", name="test_f"):
    return CellDiagnosis(name, check, earned, points, tuple(tuple(c) for c in cases), problem)


#: five students on one check with two outputs and two cases: each kind of outcome once, one mistake twice
CLASS = {
    ("full", "ex"): [cell(3.0, (None, None), (None, None))],
    ("one-off", "ex"): [cell(2.0, ("off_by_one", None), (None, None))],
    ("two-off", "ex"): [cell(1.0, ("off_by_one", "explicit"), ("off_by_one", None))],  # off_by_one counted once
    ("sign", "ex"): [cell(1.5, ("sign", None), ("", None))],
    ("lost", "ex"): [cell(2.5, (None, ""), (None, None))],
    ("crashed", "ex"): [cell(0.0, problem="no_record")],
}


def test_aggregate_counts_submissions_per_diagnosis():
    [s] = aggregate("sec", CLASS, CATALOGUE.get)
    assert (s.exercise, s.cell, s.check, s.points, s.submissions) == ("ex", "test_f", "ex.f", 3.0, 6)
    assert s.mean_score == pytest.approx(10.0 / 6)
    assert (s.passed_fully, s.failed_mistake, s.failed_rule, s.undiagnosed) == (1, 2, 2, 1)
    assert s.passed_fully + s.failed_mistake + s.failed_rule + s.undiagnosed == s.submissions
    assert s.mistakes == {"off_by_one": 2, "explicit": 1, "never": 0}  # catalogue order, zero kept
    assert s.rules == {"no_record": 1, "sign": 1}  # most frequent first, then by name
    assert s.messages["off_by_one"] == "差了一步：循环次数不对。"  # the first line only


def test_a_mistake_no_longer_catalogued_still_counts_as_a_mistake():
    graded = {("a", "ex"): [cell(0.0, ("removed_since",))]}
    [s] = aggregate("sec", graded, CATALOGUE.get)
    assert s.mistakes["removed_since"] == 1 and s.failed_mistake == 1 and s.messages["removed_since"] == ""


def test_csv_table_and_figure(tmp_path):
    stats = aggregate("sec", CLASS, CATALOGUE.get)
    path = write_csv(stats, tmp_path / "stats.csv")
    with open(path, encoding="utf-8-sig", newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows == [{k: str(v) for k, v in row.items()} for row in csv_rows(stats)]
    assert [(r["kind"], r["diagnosis"], r["matched"]) for r in rows] == [
        ("check", "", ""),
        ("mistake", "off_by_one", "2"),
        ("mistake", "explicit", "1"),
        ("mistake", "never", "0"),
        ("rule", "no_record", "1"),
        ("rule", "sign", "1"),
    ]
    assert (rows[0]["submissions"], rows[0]["mean_score"], rows[0]["undiagnosed"]) == ("6", "1.6667", "1")
    assert rows[5]["message"] == "flipped sign"
    lines = table_lines(stats)
    assert any("ex.f" in line and "1.67/3" in line for line in lines)
    assert any("off_by_one" in line and "差了一步" in line for line in lines)
    assert not any("never" in line for line in lines)  # the table shows what fired
    png = stats_figure(stats, tmp_path / "stats.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_journal_keeps_the_newest_grading_of_each_notebook(tmp_path):
    diagnoses.record(tmp_path, "sec", "a", "ex", [cell(1.0, ("off_by_one",))])
    diagnoses.record(tmp_path, "sec", "b", "ex", [cell(3.0, (None,))])
    diagnoses.record(tmp_path, "sec", "a", "ex", [cell(3.0, (None,))])  # a regrade
    latest = diagnoses.latest(tmp_path, "sec")
    assert latest == {("a", "ex"): [cell(3.0, (None,))], ("b", "ex"): [cell(3.0, (None,))]}
    [s] = class_stats(tmp_path, ["sec", "other"])
    assert (s.submissions, s.passed_fully) == (2, 2)
    assert diagnoses.latest(tmp_path, "other") == {}


def test_a_damaged_journal_line_is_named(tmp_path):
    diagnoses.record(tmp_path, "sec", "a", "ex", [cell(1.0, ("x",))])
    with journal.path(tmp_path, diagnoses.journal_name("sec")).open("a") as f:
        f.write('{"student": "b"}\n')
    with pytest.raises(ValueError, match=r"diagnoses-sec.jsonl, line 2: not a diagnoses record"):
        diagnoses.latest(tmp_path, "sec")


def test_the_command_refuses_bad_input_and_says_when_nothing_was_graded(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli, "COURSE", tmp_path)
    with pytest.raises(SystemExit, match="unknown section"):
        cli.main(["stats", "s04_99"])
    cli.main(["stats", "s04_1", "--out", str(tmp_path / "reports")])
    assert "还没有评分记录" in capsys.readouterr().out and not (tmp_path / "reports").exists()
    diagnoses.record(tmp_path, "s04_1", "a", "ex", [cell(1.0, ("x",))])
    with journal.path(tmp_path, diagnoses.journal_name("s04_1")).open("a") as f:
        f.write("not json\n")
    with pytest.raises(SystemExit, match="line 2"):
        cli.main(["stats", "s04_1"])


# --- where the diagnoses come from: the verdict, compare() and score_results() name what they diagnosed ------


def test_a_graded_cell_that_left_nothing_to_score_is_recorded_with_its_problem():
    from nbformat.v4 import new_code_cell, new_output

    from autograder.verdict.preprocessors import cell_verdict

    meta = {"nbgrader": {"grade": True, "solution": False, "grade_id": "test_fd_grad", "points": 3}}
    cell = new_code_cell('autograder.grade("s04_1_ex1", "fd_grad", fd_grad)', metadata=meta)
    assert cell_verdict(cell)[1] == CellDiagnosis("test_fd_grad", "s04_1_ex1.fd_grad", 0.0, 3.0, (), "no_record")
    cell.outputs = [new_output("error", ename="TimeoutError", evalue="cell timed out", traceback=[])]
    assert cell_verdict(cell)[1].problem == "no_record"
    cell.outputs = [new_output("display_data", data={MIME: {}}), new_output("display_data", data={MIME: {}})]
    assert cell_verdict(cell)[1].problem == "malformed"
    cell.outputs = [new_output("display_data", data={MIME: {"forged": True}})]
    assert cell_verdict(cell)[1].problem == "malformed"
    cell.source = "fd_grad(1, 2)"
    assert cell_verdict(cell)[1] == CellDiagnosis("test_fd_grad", "", 0.0, 3.0, (), "misconfigured")


def test_each_verdict_names_its_diagnosis():
    ref = np.array([[1.0, 2.0], [3.0, 4.0]])
    mistakes = {"halved": ref / 2}
    assert compare(ref, ref).diagnosis == ""
    assert compare(ref / 2, ref, mistakes=mistakes).diagnosis == "halved"  # before the generic ratio
    assert compare(ref / 2, ref).diagnosis == "ratio"
    assert compare(-ref, ref).diagnosis == "sign"
    assert compare(ref.T, ref).diagnosis == "transpose"
    assert compare(np.zeros((2, 2)), ref).diagnosis == "zero"
    assert compare(ref + 1.0, ref).diagnosis == "offset"
    assert compare(ref * (1 + 1e-6 * np.array([[1, -1], [2, 3]])), ref).diagnosis == "near_miss"
    assert compare(ref + np.array([[0.5, -0.1], [0.0, 2.0]]), ref).diagnosis == ""
    assert compare(ref[0], ref).diagnosis == "shape"
    assert compare(ref.ravel(), ref).diagnosis == "shape"
    assert compare(np.full((2, 2), np.nan), ref).diagnosis == "nonfinite"
    assert compare("text", ref).diagnosis == "type"


def test_an_integer_verdict_names_the_closest_catalogued_mistake():
    ref = np.array([1, 2, 3, 4, 5, 6, 7, 8])
    got = ref + np.array([1, 1, 1, 1, 1, 1, 1, 1])
    mistakes = {"far": got + np.array([1, 0, 0, 0, 0, 0, 0, 0]), "same": got.copy()}
    verdict = compare(got, ref, kind="integer", mistakes=mistakes, messages={"far": "远。", "same": "同。"})
    assert verdict.diagnosis == "same" and "远。" in verdict.message and "同。" in verdict.message
    assert compare(ref + 1, ref, kind="integer").diagnosis == ""


def test_score_results_gives_the_diagnosis_of_each_case_and_output():
    spec = {
        "points": 2.0,
        "messages": {"double": "翻倍了。"},
        "outputs": [
            {"label": "值", "kind": "exact", "rtol": 1e-12},
            {"label": "次数", "kind": "integer", "rtol": 0.0},
        ],
        "cases": [
            {"expected": [[1.0, 2.0], 3], "mistakes": {"double": [[2.0, 4.0], 3]}},
            {"expected": [[1.0, -1.0], 4], "mistakes": {"double": [[2.0, -2.0], 4]}},
            {"expected": [[5.0, 6.0], 1], "mistakes": {"double": [[10.0, 12.0], 1]}},
        ],
    }
    results = [
        {"status": "ok", "value": encode(([2.0, 4.0], 3))},
        {"status": "ok", "value": encode(([1.0, -1.0], 5))},
        {"status": "not_implemented"},
    ]
    scored = score_results("ex", "f", "隐藏测试", spec, results)
    assert scored.diagnoses == (("double", None), (None, ""), ("not_implemented", "not_implemented"))
    assert "翻倍了。" in scored.feedback
