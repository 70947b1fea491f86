"""Regenerating the reference data: hidden inputs, reference results, known-mistake results and tolerances, as JSON.

Generated from the reference solutions by :func:`regenerate` (deterministic: the same
bytes every time on one machine, which a test checks). A regeneration of the committed data also records what it
was computed from (:mod:`autograder.authoring.provenance`), so a test tells stale data without recomputing it.
Three files per exercise:

* ``autograder/data/<exercise>.json`` (instructor-only): per check its points, how each output
  is compared (kind, tolerance, and where the tolerance comes from), the Chinese mistake messages,
  and per hidden case the inputs, expected values and known-mistake values. Read by the verdict in
  the nbgrader process (:func:`autograder.verdict.data.load`), so grading never re-runs or imports
  a reference solution;
* ``autograder/kernel/inputs/<exercise>.json``: the hidden inputs alone, which the sandboxed grading
  kernel reads to call the student's function (:mod:`autograder.kernel.capture`);
* ``course_check/public/<exercise>.json``: the public cases with their expected values, which students'
  ``check`` reads (shipped in the student edition).

Tolerances belong to the check (:mod:`course_check.compare`). Per output the data stores

* ``stated_rtol``: the check's own band (``Output.rtol``), or null for the kind's float64 default;
* ``spread``: the measured spread of correct answers across machines (:mod:`autograder.authoring.spread`);
* ``rtol`` (what the verdict uses) = max(stated band or kind default, :data:`SAFETY` x spread), and ``atol``.

Measuring the spread re-runs every reference under several environments (minutes), so it is its own
step: ``regenerate(measure=True)`` (what ``python -m autograder regenerate`` does). A plain
``regenerate()`` keeps the spread stored in ``spread_from`` for every check whose outputs and number
of cases are unchanged and measures only the others, so it costs one reference run.

Every regeneration refuses (:class:`ToleranceError`, naming the check) a tolerance that does not
clearly separate correct answers from a catalogued mistake: a mistake whose result on some hidden
case lies between 1/:data:`OVERLAP` and :data:`OVERLAP` tolerances from the reference
(:func:`tolerance_problems`). It also refuses (:class:`HintError`) a check whose hidden inputs overflow
a naive softplus or sigmoid but which has no non-finite hint, or the other way round
(:mod:`autograder.authoring.naive_math`).
"""

from __future__ import annotations

import ast
import contextlib
import json
import math
from pathlib import Path

import numpy as np

from autograder.authoring import provenance
from autograder.authoring import spread as spread_
from autograder.authoring.cases import drawing_hidden, drawing_public
from autograder.authoring.naive_math import hint_problems
from autograder.authoring.registry import Check, Output, all_checks
from autograder.kernel.capture import INPUTS_DIR
from autograder.authoring.sources import COURSE_DIR, check_points, defines, graded_callable, template_signature
from course_check.scoring import constant_best
from course_check import PUBLIC_DIR
from course_check.compare import NONFINITE, tolerance
from autograder.verdict.data import DATA_DIR, load

#: the stored tolerance is at least this many times the measured spread: the variants imitate other
#: machines but are not all of them (an AVX-512 machine reorders sums in ways an AVX2 one cannot
#: imitate), so a correct answer elsewhere may stray a few times further than measured here.
SAFETY = 100.0
#: a mistake must lie more than this many tolerances from the reference wherever it differs at all
OVERLAP = 10.0
#: largest relative tolerance a measured spread may widen an output to; beyond it the check no longer
#: checks digits and needs another design (a stated band, properties instead of values)
MAX_WIDENED_RTOL = 1e-2


class ToleranceError(ValueError):
    """A check whose tolerance cannot tell correct answers (on any machine) from a catalogued mistake."""


class HintError(ValueError):
    """A check whose non-finite hint does not fit its hidden inputs (:func:`autograder.authoring.naive_math.hint_problems`)."""


def _plain(value):
    """numpy/JAX values to JSON-ready Python (floats keep their exact shortest repr)."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, str):  # a name-valued input (a system, an integrator, a contact law)
        return value
    arr = np.asarray(value)
    if arr.dtype.kind in "iub":
        return arr.tolist()
    return np.asarray(arr, dtype=np.float64).tolist()


def _components(check: Check, value):
    return list(value) if len(check.outputs) > 1 else [value]


def compute_cases(check: Check, public: bool = False, inputs: list[dict] | None = None) -> list[dict]:
    """Per hidden (or ``public``) case of ``check``: its inputs, expected values and known-mistake values (JSON-ready).

    ``inputs`` are the cases ``check.cases()`` draws, when the caller has drawn them already. The public cases
    are computed entirely inside :func:`~autograder.authoring.cases.drawing_public`, so a reference that looks
    up how its case was drawn (e.g. the true parameters of an experiment) finds it.
    """
    with drawing_public() if public else contextlib.nullcontext():
        return [
            {
                "inputs": _plain(inputs),
                "expected": _plain(_components(check, check.reference(**inputs))),
                "mistakes": {
                    name: _plain(_components(check, m.fn(**inputs))) for name, m in sorted(check.mistakes.items())
                },
            }
            for inputs in (check.cases() if inputs is None else inputs)
        ]


def call_convention(check: Check, cases: list[dict]) -> dict:
    """``{"params": [...], "signature": "..."}``: the order grading passes a case's inputs in, and the
    template's signature the feedback quotes. Raises when the cases disagree with the template."""
    orders = {tuple(case["inputs"]) for case in cases}
    if len(orders) != 1:
        raise ValueError(f"{check.key}: its cases do not all take the same inputs in the same order: {orders}")
    order = list(orders.pop())
    passed = graded_callable(check.exercise, check.name)
    # an adapter (a lambda, a kernel-support wrapper) passes the inputs on to the student's function it names
    named = [n.id for n in ast.walk(ast.parse(passed)) if isinstance(n, ast.Name)]
    student_fn = check.name if passed == check.name else next(n for n in named if defines(check.exercise, n))
    params, signature = template_signature(check.exercise, student_fn)
    # by_hand and own_code pass the inputs on unchanged, so the template's order holds for them too
    call = ast.parse(passed, mode="eval").body
    unchanged = passed == check.name or (
        isinstance(call, ast.Call)
        and ast.unparse(call.func) in ("by_hand", "own_code")
        and ast.unparse(call.args[0]) == check.name
    )
    if unchanged and order != params[: len(order)]:
        raise ValueError(
            f"{check.key}: grading passes {order} positionally, the template is {signature}; "
            "write the case dicts in the template's order"
        )
    return {"params": order, "signature": signature}


def _disjoint(key: str, hidden: list[dict], public: list[dict]) -> None:
    seen = {serialise(case["inputs"]) for case in hidden}
    same = [i for i, case in enumerate(public, start=1) if serialise(case["inputs"]) in seen]
    if same or not public:
        problem = f"public cases {same} equal hidden ones" if same else "no public case"
        raise ValueError(
            f"{key}: {problem}; draw the case function's random inputs from case_rng and pass its fixed "
            "settings through case_value (autograder/authoring/cases.py)"
        )


def derived_rtol(key: str, output: Output, spread: float) -> float:
    """The stored relative tolerance of ``output``: its band (or the float64 default of its kind),
    widened to :data:`SAFETY` x the measured ``spread`` of correct answers."""
    if output.kind == "integer":
        if spread:
            raise ToleranceError(
                f"{key}, output {output.label!r}: an integer output differs between machines "
                f"(relative spread {spread:.1e}); a correct answer would lose points elsewhere"
            )
        return 0.0
    base = tolerance(output.kind) if output.rtol is None else float(output.rtol)
    wanted = spread_.round_up(SAFETY * spread)
    if wanted > max(base, MAX_WIDENED_RTOL):
        raise ToleranceError(
            f"{key}, output {output.label!r}: correct answers spread by {spread:.1e} (relative) "
            f"between machines, which would need a tolerance of {wanted:.1e}; make the check stable "
            "(other hidden inputs, a stated band or a property) before grading with it"
        )
    return max(base, wanted)


def _distance_ratio(expected, value, rtol: float, atol: float) -> float:
    """``max|value - expected| / (rtol * max|expected| + atol)``: 1 is the edge of acceptance; inf: always caught."""
    e, v = np.asarray(expected, dtype=np.float64), np.asarray(value, dtype=np.float64)
    if e.shape != v.shape or not np.array_equal(np.isfinite(e), np.isfinite(v)):
        return math.inf
    finite = np.isfinite(e)
    if not np.array_equal(e[~finite], v[~finite], equal_nan=True):
        return math.inf
    diff = float(np.max(np.abs(e[finite] - v[finite]), initial=0.0))
    allowed = rtol * float(np.max(np.abs(e[finite]), initial=0.0)) + atol
    if diff == 0.0:
        return 0.0
    return diff / allowed if allowed > 0 else math.inf


def mistake_ratio(case: dict, name: str, outputs: list[dict]) -> float:
    """How far mistake ``name`` lies from the reference on one hidden case, in tolerances: the largest
    :func:`_distance_ratio` over the outputs (a case passes only when every output passes)."""
    return max(
        _distance_ratio(case["expected"][j], case["mistakes"][name][j], o["rtol"], o.get("atol", 0.0))
        for j, o in enumerate(outputs)
    )


def tolerance_problems(key: str, outputs: list[dict], cases: list[dict]) -> list[str]:
    """Why the tolerances of check ``key`` (its stored ``outputs``) do not separate its catalogued mistakes.

    On every hidden case a mistake must be either clearly accepted (it does not show on this case:
    within 1/:data:`OVERLAP` of the tolerance on every output) or clearly rejected (beyond
    :data:`OVERLAP` x the tolerance on some output); in between, a spread between machines a few
    times larger than measured could change its verdict.
    """
    problems = []
    for i, case in enumerate(cases, start=1):
        for name in case["mistakes"]:
            ratio = mistake_ratio(case, name, outputs)
            if 1.0 / OVERLAP < ratio <= OVERLAP:
                bands = ", ".join(f"{o['label']!r}: rtol {o['rtol']:.1e} (spread {o['spread']:.1e})" for o in outputs)
                problems.append(
                    f"hidden case {i}: mistake {name!r} lies {ratio:.3g} tolerances from the reference "
                    f"(must be below {1 / OVERLAP:g} or above {OVERLAP:g}); {bands}"
                )
    return problems


def zero_reference_problems(outputs: list[dict], cases: list[dict]) -> list[str]:
    """Float outputs whose reference is all zeros on some case but which state no absolute tolerance: relative
    to nothing, a correct answer's rounding (1e-17) would fail there."""
    return [
        f"case {i}: the reference of {o['label']!r} is all zeros and the output has no atol; state one "
        "(Output(..., atol=...): what 0 means for this quantity)"
        for i, case in enumerate(cases, start=1)
        for o, value in zip(outputs, case["expected"])
        if o["kind"] != "integer" and not o["atol"] and np.size(value) and not np.any(np.asarray(value, dtype=float))
    ]


def uncaught_mistakes(key: str, spec: dict) -> list[str]:
    """Catalogued mistakes of a stored check that pass every hidden case (they cost no points here)."""
    names = spec["cases"][0]["mistakes"] if spec["cases"] else {}
    return [
        f"{key}: mistake {name!r} passes every hidden case"
        for name in names
        if all(mistake_ratio(case, name, spec["outputs"]) <= 1.0 for case in spec["cases"])
    ]


def check_data(
    check: Check, cases: list[dict], spreads: list[float], points: float, public: list[dict], convention: dict
) -> tuple:
    """``(hidden entry, public entry)`` of ``check`` (worth ``points``, as its graded cell says, called as
    ``convention`` says: :func:`call_convention`); raises :class:`ToleranceError` when its tolerances
    overlap a mistake on a hidden or a public case."""
    outputs = [
        {
            "label": o.label,
            "kind": o.kind,
            "weight": float(o.weight),
            "stated_rtol": o.rtol,
            "spread": s,
            "rtol": derived_rtol(check.key, o, s),
            "atol": float(o.atol),
        }
        for o, s in zip(check.outputs, spreads, strict=True)
    ]
    problems = tolerance_problems(check.key, outputs, cases)
    problems += [f"public {p}" for p in tolerance_problems(check.key, outputs, public)]
    problems += zero_reference_problems(outputs, cases)
    problems += [f"public {p}" for p in zero_reference_problems(outputs, public)]
    if problems:
        raise ToleranceError(
            f"the tolerances of check {check.key} do not separate its catalogued mistakes or cannot judge a zero "
            "reference:\n  " + "\n  ".join(problems)
        )
    _disjoint(check.key, cases, public)
    for which, drawn in (("hidden", cases), ("public", public)):
        if check.credit == "above_constant" and constant_best(drawn) >= len(drawn):
            raise ToleranceError(f"check {check.key}: every {which} case has the same label; a constant answer passes")
    common = {
        "points": points,
        **({"credit": check.credit} if check.credit != "per_case" else {}),
        **convention,
        "messages": {
            **{name: m.message for name, m in sorted(check.mistakes.items())},
            **({NONFINITE: check.nonfinite_hint} if check.nonfinite_hint else {}),
        },
    }
    shown = [{k: o[k] for k in ("label", "kind", "weight", "rtol", "atol")} for o in outputs]
    return {**common, "outputs": outputs, "cases": cases}, {**common, "outputs": shown, "cases": public}


def stored_spread(check: Check, n_cases: int, data_dir: Path = DATA_DIR) -> list[float] | None:
    """The spread stored for ``check`` in ``data_dir``, if its outputs and number of cases are unchanged."""
    path = data_dir / f"{check.exercise}.json"
    if not path.exists():
        return None
    spec = json.loads(path.read_text(encoding="utf-8")).get(check.name)
    if not spec or len(spec.get("cases", ())) != n_cases:
        return None
    stored = spec.get("outputs", [])
    same = [(o.get("label"), o.get("kind"), o.get("stated_rtol", o.get("rtol")), "spread" in o) for o in stored]
    if same != [(o.label, o.kind, o.rtol, True) for o in check.outputs]:
        return None
    return [float(o["spread"]) for o in stored]


def inputs_only(data: dict) -> dict:
    """``{check name: {"params": argument order, "cases": [inputs of each case]}}``: what the grading
    kernel may see of ``data``."""
    return {
        name: {"params": spec["params"], "cases": [case["inputs"] for case in spec["cases"]]}
        for name, spec in data.items()
    }


def serialise(data) -> str:
    return json.dumps(data, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def _spreads(checks: list[Check], cases: dict, measure: bool, spread_from: Path, variants) -> dict:
    spreads = {} if measure else {c.key: stored_spread(c, len(cases[c.key]), spread_from) for c in checks}
    missing = [c for c in checks if spreads.get(c.key) is None]
    if missing:
        spreads.update(
            spread_.measure(
                {c.key: [case["inputs"] for case in cases[c.key]] for c in missing},
                {c.key: [case["expected"] for case in cases[c.key]] for c in missing},
                variants,
            )
        )
    return spreads


def regenerate(
    exercises=None,
    out_dir: Path = DATA_DIR,
    inputs_dir: Path = INPUTS_DIR,
    public_dir: Path = PUBLIC_DIR,
    measure: bool = False,
    spread_from: Path = DATA_DIR,
    variants: dict | None = None,
    salt: str | None = None,
) -> list[Path]:
    """Write ``<exercise>.json`` (hidden data, hidden inputs, public checks) for the given exercises (all
    by default); returns the data paths.

    Args:
        measure: measure the spread of correct answers for every check (minutes); otherwise keep the
            spread stored in ``spread_from`` where it still fits and measure only the rest.
        variants: environments of the spread measurement (default :data:`autograder.authoring.spread.VARIANTS`).
        salt: the term's salt for the hidden cases (default: ``[grading] salt`` of ``assignments/term.toml``).

    Nothing is written when a check is refused (:class:`ToleranceError`, :class:`HintError`).
    """
    by_exercise: dict[str, list[Check]] = {}
    for check in all_checks().values():
        by_exercise.setdefault(check.exercise, []).append(check)
    chosen = sorted(exercises or by_exercise)
    checks = [check for exercise in chosen for check in by_exercise[exercise]]
    if salt is None:
        from autograder.ops.term import load_term

        salt = load_term(COURSE_DIR).salt
    # A reference may look up how its case was drawn (the true parameters of a hidden experiment): wherever it
    # runs on the hidden cases (here, under naive formulas, in the spread workers) it runs in the same context.
    with drawing_hidden(salt):
        hidden = {check.key: check.cases() for check in checks}
        cases = {check.key: compute_cases(check, inputs=hidden[check.key]) for check in checks}
    # the public cases before the naive-formula run, which clears JAX's caches: here they reuse what the hidden
    # cases compiled (s04_2, s04_9, s04_end, mini_diffsim: 61 -> 36 CPU s for their public cases)
    public = {check.key: compute_cases(check, public=True) for check in checks}
    with drawing_hidden(salt):
        problems = hint_problems(checks, hidden)
        if problems:
            raise HintError("\n".join(problems))
        spreads = _spreads(checks, cases, measure, spread_from, variants)
    data, shipped = {}, {}
    for exercise in chosen:
        points = check_points(exercise)
        if points.keys() != {c.name for c in by_exercise[exercise]}:
            raise ValueError(
                f"{exercise}: the graded cells grade {sorted(points)}, the spec declares "
                f"{sorted(c.name for c in by_exercise[exercise])}"
            )
        entries = {
            c.name: check_data(
                c,
                cases[c.key],
                spreads[c.key],
                points[c.name],
                public[c.key],
                call_convention(c, [*cases[c.key], *public[c.key]]),
            )
            for c in by_exercise[exercise]
        }
        data[exercise] = {name: hidden for name, (hidden, _) in entries.items()}
        shipped[exercise] = {name: shown for name, (_, shown) in entries.items()}
    for folder in (out_dir, inputs_dir, public_dir):
        folder.mkdir(parents=True, exist_ok=True)
    written = {}
    for exercise in chosen:
        path = out_dir / f"{exercise}.json"
        path.write_text(serialise(data[exercise]), encoding="utf-8")
        (inputs_dir / path.name).write_text(serialise(inputs_only(data[exercise])), encoding="utf-8")
        (public_dir / path.name).write_text(serialise(shipped[exercise]), encoding="utf-8")
        written[exercise] = [path, inputs_dir / path.name, public_dir / path.name]
    if [d.resolve() for d in (out_dir, inputs_dir, public_dir)] == [DATA_DIR, INPUTS_DIR, PUBLIC_DIR]:
        provenance.record(written)  # the committed data: what it was regenerated from
    return [paths[0] for paths in written.values()]


def notebook_problems(exercises) -> list[str]:
    """Where the committed data of ``exercises`` disagrees with their notebooks: a graded cell's points, or the
    parameters (and the signature quoted in feedback) a check passes its cases in."""
    from autograder.authoring import sources  # looked up at call time (a test replaces check_points)

    checks, problems = all_checks(), []
    for exercise in sorted(exercises):
        data, points = load(exercise), sources.check_points(exercise)
        fix = f"{provenance.FIX} {sources.source_path(exercise).parent.name}"
        if data.keys() != points.keys():
            problems.append(f"{exercise}: the data grades {sorted(data)}, the notebook's graded cells {sorted(points)}")
            continue
        for name, spec in sorted(data.items()):
            # the stored cases' keys are sorted; in the stored order the template must still take them
            cases = [{"inputs": {k: case["inputs"][k] for k in spec["params"]}} for case in spec["cases"]]
            try:
                want = {"points": points[name], **call_convention(checks[f"{exercise}.{name}"], cases)}
            except ValueError as exc:
                problems.append(f"{exercise}.{name}: {exc}; run `{fix}`")
                continue
            got = {key: spec.get(key) for key in want}
            if got != want:
                problems.append(f"{exercise}.{name}: the data says {got}, the notebook {want}; run `{fix}`")
    return problems


def tolerance_rows(data: dict) -> list[tuple]:
    """``(check, output label, spread, rtol, nearest mistake)`` of each output in ``{exercise: data}``.

    The nearest mistake is the smallest relative distance of a catalogued mistake that the tolerance
    rejects (``nan`` when no mistake changes the output).
    """
    rows = []
    for exercise, checks in sorted(data.items()):
        for name, spec in sorted(checks.items()):
            for j, output in enumerate(spec["outputs"]):
                nearest = math.nan
                for case in spec["cases"]:
                    for values in case["mistakes"].values():
                        ratio = _distance_ratio(case["expected"][j], values[j], output["rtol"], output.get("atol", 0.0))
                        d = spread_.deviation(case["expected"][j], values[j])
                        if ratio > 1.0 and not d >= nearest:
                            nearest = d
                rows.append((f"{exercise}.{name}", output["label"], output["spread"], output["rtol"], nearest))
    return rows


#: Across machines the determinism test compares within the stored tolerance instead of byte for byte.
#: Why not round stored values to their stable digits instead: a value near a rounding boundary still
#: rounds differently on two machines, so rounding cannot make the bytes equal, and rounding moves
#: every expected value by up to half a unit of its last kept digit, which would eat the tolerance.
#: Inputs are seeded draws (bit-identical everywhere) or short reference rollouts; INPUT_RTOL
#: accepts rounding in the latter and nothing a changed generator would produce.
INPUT_RTOL = 1e-9


def _numbers_agree(a, b, rtol: float) -> bool:
    """JSON values ``a`` and ``b`` equal, except that numbers may differ by ``rtol`` of their array's magnitude."""
    if isinstance(a, dict) or isinstance(b, dict):
        return (
            isinstance(a, dict)
            and isinstance(b, dict)
            and a.keys() == b.keys()
            and all(_numbers_agree(a[k], b[k], rtol) for k in a)
        )
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    try:
        x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    except (TypeError, ValueError):  # ragged lists
        return a == b
    return _distance_ratio(x, y, rtol, 0.0) <= 1.0 if rtol else np.array_equal(x, y, equal_nan=True)


def _fixed(spec: dict) -> tuple:
    """What a regeneration must reproduce exactly: points, messages, outputs (less the measured spread
    and the tolerance it gives) and the call convention."""
    outputs = [{k: v for k, v in o.items() if k not in ("spread", "rtol")} for o in spec["outputs"]]
    return spec["points"], spec["messages"], outputs, spec["params"], spec["signature"]


def disagreements(committed: dict, fresh: dict) -> list[str]:
    """Where a fresh regeneration of one exercise disagrees with the committed data, beyond rounding.

    Points, labels, kinds, stated bands and messages must be equal; inputs agree within
    :data:`INPUT_RTOL`; expected and mistake values within the committed tolerance of their output.
    The measured spread (and the tolerance it gives) is a measurement of the machine that ran it, so it
    is not compared.
    """
    problems = []
    if committed.keys() != fresh.keys():
        return [f"checks {sorted(committed)} != {sorted(fresh)}"]
    for name, old in committed.items():
        new = fresh[name]
        if _fixed(old) != _fixed(new):
            problems.append(f"{name}: points, messages, output kinds or call convention differ")
            continue
        if len(old["cases"]) != len(new["cases"]):
            problems.append(f"{name}: {len(old['cases'])} cases != {len(new['cases'])}")
            continue
        for i, (a, b) in enumerate(zip(old["cases"], new["cases"]), start=1):
            if not _numbers_agree(a["inputs"], b["inputs"], INPUT_RTOL):
                problems.append(f"{name}, case {i}: inputs differ")
            if a["mistakes"].keys() != b["mistakes"].keys():
                problems.append(f"{name}, case {i}: catalogued mistakes differ")
                continue
            for label, old_values, new_values in [
                ("expected", a["expected"], b["expected"]),
                *((m, a["mistakes"][m], b["mistakes"][m]) for m in a["mistakes"]),
            ]:
                for j, output in enumerate(old["outputs"]):
                    if not _numbers_agree(old_values[j], new_values[j], output["rtol"]):
                        problems.append(
                            f"{name}, case {i}, {label}, output {output['label']!r}: beyond rtol {output['rtol']:.1e}"
                        )
    return problems
