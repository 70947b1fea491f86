"""Build the executable book once with the real jupyter-book (execution on, warnings fatal)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def built_book(tmp_path_factory):
    out = tmp_path_factory.mktemp("book")
    jb = shutil.which("jupyter-book", path=str(Path(sys.executable).parent)) or "jupyter-book"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(
        [jb, "build", str(ROOT), "--path-output", str(out), "--warningiserror", "--keep-going"],
        capture_output=True, text=True, env=env, timeout=1800,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-6000:]
    return out / "_build" / "html"


@pytest.mark.xdist_group("book")
def test_index_page_shows_executed_course_lib_output(built_book):
    html = (built_book / "book" / "index.html").read_text(encoding="utf-8")
    assert "cell_output" in html
    assert "[-0.2  -0.19 -0.18 -0.17 -0.16]" in html  # printed by the executed cell
    assert "CC BY 4.0" in html
