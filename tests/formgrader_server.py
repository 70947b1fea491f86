"""Formgrader as a TA runs it, for the browser tests: a real Jupyter server in a course folder, and an offline tab.

:func:`formgrader_server` starts ``jupyter server`` with nbgrader's formgrader in the course folder (as the
instructors page says), authenticated by :data:`TOKEN`, and yields its base URL. :func:`offline_tab` opens a
browser tab that sends the token on every request and blocks (and records) every request that would leave
localhost.
:func:`open_submission` opens one submission and returns once a TA could start typing.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

TOKEN = "formgrader-test-token"
LOCAL = ("http://127.0.0.1", "file://", "data:", "about:", "blob:")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def formgrader_server(course: Path, log_name: str = "jupyter-server.log", env: dict | None = None):
    """``base URL`` of a Jupyter server with formgrader, started in ``course`` (environment: ours + ``env``)."""
    port = _free_port()
    log = (course / log_name).open("w")
    bin_dir = str(Path(sys.executable).parent)
    # nbgrader calls alembic by name
    full_env = {**os.environ, **(env or {}), "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyter",
            "server",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={port}",
            f"--IdentityProvider.token={TOKEN}",
            f"--ServerApp.root_dir={course}",
            "--allow-root",  # CI grades as root
        ],
        cwd=course,
        env=full_env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={TOKEN}", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the Jupyter server did not start:\n{log.name}: {Path(log.name).read_text()[-4000:]}")
                time.sleep(0.5)
        yield base
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


@contextlib.contextmanager
def offline_tab(browser):
    """A tab whose every request carries the token (a token in the URL authenticates one page, not its API
    calls); a request that would leave localhost is blocked and fails the test when the tab closes."""
    context = browser.new_context(
        viewport={"width": 1280, "height": 900}, extra_http_headers={"Authorization": f"token {TOKEN}"}
    )
    outside = []

    def route(r):
        if r.request.url.startswith(LOCAL):
            r.continue_()
        else:
            outside.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    try:
        yield context.new_page()
    finally:
        context.close()
    assert outside == [], f"requests left localhost: {outside[:5]}"


# formgrader fetches a submission's grades and comments after the page loads, then builds one view per cell; a view
# built after a score or comment was typed overwrites it with the stored value, and the change that would save it
# never fires. MathJax's end-of-typesetting signal moves the focus to the first input. A TA starts after all three.
_READY = (
    "window.formgrader && formgrader.grades && formgrader.grades.loaded"
    " && formgrader.comments && formgrader.comments.loaded && window.MathJax && MathJax.loaded === true"
)


def open_submission(tab, base: str, submission: str) -> None:
    """Open ``submission`` in formgrader and wait until its scores and comments can be typed and saved."""
    tab.goto(f"{base}/formgrader/submissions/{submission}/")
    tab.wait_for_function(_READY, timeout=30_000)


# A slow server, as on a busy term's night: formgrader's request for a submission's comments answers 2 s late.
# The page looks ready long before that; a TA (or a test) typing then loses the comment.
LATE_COMMENTS = """
(() => {
  const open = XMLHttpRequest.prototype.open, send = XMLHttpRequest.prototype.send;
  XMLHttpRequest.prototype.open = function (method, url, ...rest) {
    this._lateComments = method === "GET" && String(url).includes("/api/comments");
    return open.call(this, method, url, ...rest);
  };
  XMLHttpRequest.prototype.send = function (...args) {
    if (this._lateComments) { setTimeout(() => send.apply(this, args), 2000); } else { send.apply(this, args); }
  };
})();
"""
