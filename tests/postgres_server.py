"""A real PostgreSQL server for the tests, from Debian's ``postgresql`` package.

:func:`postgres_server` (a context manager) and the session fixture :func:`postgres_url` start a
throw-away server: ``initdb`` in a fresh temporary folder, password authentication only
(``scram-sha-256`` for TCP and Unix sockets alike, random passwords, never ``trust``: grading
kernels can reach local Unix sockets), listening on 127.0.0.1 on a free port with its Unix socket
in that folder (``-k``), never in /var/run/postgresql. It creates a role ``grader`` (no superuser)
and a database ``s04_diffsim`` owned by it, yields the SQLAlchemy URL
``postgresql+psycopg2://grader:PASSWORD@127.0.0.1:PORT/s04_diffsim``, and stops the server
(``pg_ctl stop -m fast``) and removes the folder afterwards.

The programs are looked for in ``/usr/lib/postgresql/*/bin`` (the newest version wins). Without
them the test is skipped, or fails when the environment variable ``CI`` is set (``.ci/run``
installs the package). ``initdb`` refuses to run as root: as root the server runs as the
package's ``postgres`` user, in a folder chowned to it; otherwise as the current user.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import secrets
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

PG_ROOT = Path("/usr/lib/postgresql")
PROGRAMS = ("initdb", "pg_ctl", "postgres")
DATABASE, ROLE = "s04_diffsim", "grader"


@dataclass(frozen=True)
class Server:
    url: str  # SQLAlchemy URL of the database, as the grader role (password included)
    admin_dsn: dict  # psycopg2.connect keywords of the superuser, TCP
    socket_dir: Path  # where the server's Unix socket is
    port: int


def find_bin_dir(root: Path | None = None) -> Path | None:
    """The newest ``/usr/lib/postgresql/<version>/bin`` that holds initdb, pg_ctl and postgres."""
    root = PG_ROOT if root is None else root

    def version(path: Path) -> tuple:
        return tuple(int(x) for x in re.findall(r"\d+", path.parent.name))

    found = [p for p in root.glob("*/bin") if all((p / name).is_file() for name in PROGRAMS)]
    return max(found, key=version) if found else None


def _unavailable(why: str):
    if os.environ.get("CI"):
        pytest.fail(f"{why} (CI is set: .ci/run installs Debian's postgresql)")
    pytest.skip(why)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def postgres_server():
    """Start a password-only PostgreSQL server in a temporary folder; yield its :class:`Server`."""
    bin_dir = find_bin_dir()
    if bin_dir is None:
        _unavailable(f"no PostgreSQL server programs ({', '.join(PROGRAMS)}) under {PG_ROOT}/*/bin")
    import psycopg2  # the pinned driver (pyproject.toml)

    if os.geteuid() == 0:
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            _unavailable("running as root, and there is no 'postgres' user to run the server as")
        as_user = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
    else:
        user, as_user = pwd.getpwuid(os.geteuid()), {}
    # not under pytest's tmp_path: its folders are private to root, the server user could not enter them
    folder = Path(tempfile.mkdtemp(prefix="s04-pg-"))
    os.chown(folder, user.pw_uid, user.pw_gid)  # mkdtemp made it 0700: the server user's alone
    data, log = folder / "data", folder / "server.log"
    admin_password, grader_password = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}  # no PGPASSWORD, PGHOST, ... of ours

    def run(*args, timeout=120):
        proc = subprocess.run(
            [str(a) for a in args], cwd=folder, env=env, capture_output=True, text=True, timeout=timeout, **as_user
        )
        if proc.returncode != 0:
            server_log = log.read_text(errors="replace")[-3000:] if log.is_file() else ""
            raise RuntimeError(f"{args[0]} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}\n{server_log}")
        return proc

    started = False
    try:
        pwfile = folder / "pwfile"
        pwfile.write_text(admin_password + "\n")
        os.chown(pwfile, user.pw_uid, user.pw_gid)
        pwfile.chmod(0o600)
        run(
            bin_dir / "initdb",
            "-D",
            data,
            "-U",
            "postgres",
            "--auth=scram-sha-256",
            f"--pwfile={pwfile}",
            "-E",
            "UTF8",
            "--no-locale",
            "--no-sync",
        )
        pwfile.unlink()
        # a test server: durability off (faster, and nothing of value is in it)
        settings = "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        for attempt in range(3):  # the port was free a moment ago; another process may have taken it since
            port = _free_port()
            try:
                run(
                    bin_dir / "pg_ctl",
                    "-D",
                    data,
                    "-l",
                    log,
                    "-w",
                    "-t",
                    "60",
                    "-o",
                    f"-h 127.0.0.1 -p {port} -k {folder} {settings}",
                    "start",
                )
                break
            except RuntimeError:
                if attempt == 2:
                    raise
        started = True
        admin = {
            "host": "127.0.0.1",
            "port": port,
            "user": "postgres",
            "password": admin_password,
            "dbname": "postgres",
        }
        conn = psycopg2.connect(**admin)
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(f"CREATE ROLE {ROLE} LOGIN PASSWORD %s", (grader_password,))
                cur.execute(f"CREATE DATABASE {DATABASE} OWNER {ROLE}")
        finally:
            conn.close()
        yield Server(
            url=f"postgresql+psycopg2://{ROLE}:{grader_password}@127.0.0.1:{port}/{DATABASE}",
            admin_dsn=admin,
            socket_dir=folder,
            port=port,
        )
    finally:
        try:
            if started:
                run(bin_dir / "pg_ctl", "-D", data, "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres():
    """A running throw-away PostgreSQL server (:class:`Server`), one per test session (per xdist worker)."""
    with postgres_server() as server:
        yield server
