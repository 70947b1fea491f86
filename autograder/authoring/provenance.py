"""What the committed reference data was regenerated from: a test tells stale data without regenerating it.

A regeneration into the committed folders (:func:`autograder.authoring.regenerate.regenerate` with its default
``out_dir``) records in :data:`MANIFEST`, per exercise, the content hash of every file its data depends on and of
the three files it wrote (hidden data, kernel inputs, public checks). The data is fresh when both still hold:
the same sources give the same data (a regeneration is deterministic; tests/test_grading_pipeline.py shows it on
one section, and the grading contract shows the notebooks' reference solutions reproduce the data on another
machine), so re-running every reference in every CI run proved nothing more, at about 230 CPU seconds.

The sources of an exercise are the files whose content can change what its regeneration writes:

* every Python module of :data:`COMPUTING` (the library, the public checks, the authoring tools and the kernel
  helpers the references share), except the other sections' reference modules, so that editing one section
  leaves the others fresh. The grading side (nbgrader plumbing, confinement, verdicts, term tools) is not
  among them: it reads the data but computes none of it;
* ``assignments/term.toml`` (the salt of the hidden cases) and ``requirements.lock`` (the versions that compute).

What the data takes from the exercise's notebook (each graded cell's points, the template's parameters) is compared
with the notebook directly (:func:`autograder.authoring.regenerate.notebook_problems`), so that editing an
exercise's text needs no regeneration.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: exercise -> {"sources": {path: hash}, "outputs": {path: hash}}, paths relative to the repository
MANIFEST = Path(__file__).with_name("provenance.json")
#: the folders whose Python modules compute the data (autograder/authoring/reference: the exercise's section only)
COMPUTING = ("course_lib", "course_check", "autograder/authoring", "autograder/kernel_support")
#: the modules of those folders that only scan, copy or record the data and the notebooks
NOT_COMPUTING = tuple(f"autograder/authoring/{name}.py" for name in ("leak_scan", "release_scan", "student_copy"))
#: files every exercise depends on besides Python modules
SHARED = ("assignments/term.toml", "requirements.lock")
#: how to bring stale data up to date (no spread measurement: the stored spread is kept where it still fits)
FIX = "python -m autograder regenerate --keep-spread"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def python_sources(section: str) -> set[Path]:
    """The modules of :data:`COMPUTING` that can change the data of ``section``'s exercises (this one records
    only)."""
    reference = ROOT / "autograder/authoring/reference"
    return {
        path
        for folder in COMPUTING
        for path in (ROOT / folder).rglob("*.py")
        if (path.parent != reference or path.stem in ("__init__", section))
        and path != Path(__file__).resolve()
        and str(path.relative_to(ROOT)) not in NOT_COMPUTING
    }


def sources(section: str) -> dict[str, str]:
    """``{path relative to the repository: content hash}`` of everything the data of ``section``'s exercises
    depends on."""
    files = python_sources(section) | {ROOT / name for name in SHARED}
    return {str(f.relative_to(ROOT)): digest(f) for f in sorted(files)}


class _SourcesBySection(dict):
    """:func:`sources` of each section asked for, hashed once per call of :func:`record` or :func:`stale`."""

    def __missing__(self, section: str) -> dict[str, str]:
        self[section] = sources(section)
        return self[section]


def _read(manifest: Path) -> dict:
    return json.loads(manifest.read_text(encoding="utf-8")) if manifest.exists() else {}


def record(written: dict[str, list[Path]], manifest: Path = MANIFEST) -> None:
    """Store, for each exercise of ``written`` (``{exercise: the files its regeneration wrote}``), its sources' and
    its outputs' hashes; the other exercises' entries stay."""
    entries, by_section = _read(manifest), _SourcesBySection()
    for exercise, outputs in written.items():
        entries[exercise] = {
            "sources": by_section[section_of(exercise)],
            "outputs": {str(p.resolve().relative_to(ROOT)): digest(p) for p in sorted(outputs)},
        }
    manifest.write_text(json.dumps(dict(sorted(entries.items())), indent=1) + "\n", encoding="utf-8")


def section_of(exercise: str) -> str:
    from autograder.authoring.sources import source_path

    return source_path(exercise).parent.name  # assignments/source/<section>/<exercise>.md


def stale(exercises, manifest: Path = MANIFEST) -> list[str]:
    """Why the committed data of ``exercises`` may not be what their current sources give (empty when fresh)."""
    entries, by_section = _read(manifest), _SourcesBySection()
    problems = []
    for exercise in sorted(exercises):
        section = section_of(exercise)
        fix = f"{FIX} {section}"
        entry = entries.get(exercise)
        if entry is None:
            problems.append(f"{exercise}: not in {manifest.name}; run `{fix}`")
            continue
        now = by_section[section]
        changed = sorted(p for p in now.keys() | entry["sources"].keys() if now.get(p) != entry["sources"].get(p))
        if changed:
            shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
            problems.append(f"{exercise}: regenerated from other sources ({shown} changed since); run `{fix}`")
        edited = sorted(p for p, h in entry["outputs"].items() if not (ROOT / p).is_file() or digest(ROOT / p) != h)
        if edited:
            problems.append(
                f"{exercise}: {', '.join(edited)} differ from what the regeneration wrote; never edit them by hand, "
                f"run `{fix}`"
            )
    return problems
