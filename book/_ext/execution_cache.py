"""Create the book's execution cache once, in the main process, before any page is read.

myst-nb opens the jupyter-cache folder (``_build/.jupyter_cache``) lazily, in whichever process executes a
page. With Sphinx's parallel read (book/build.py) two processes open an empty cache at the same moment:
jupyter-cache checks whether ``global.db`` exists, finds it missing in both, and both create its tables, so
one of them fails with ``sqlite3.OperationalError: table settings already exists`` (or with
``FileExistsError`` on the cache folder). The build then fails at random on a fresh machine.

Here the main process creates the folder, the database with all its tables and the version file on
``builder-inited``, after myst-nb has resolved the cache path and before the readers fork; the readers
then find a complete cache. :func:`prepare` holds an exclusive lock while it creates, so two builds into
the same output folder at once, or a build killed half-way through creating the tables, cannot leave a
cache the next build trips over either (``create_all`` only adds the tables that are missing).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from jupyter_cache import __version__ as JUPYTER_CACHE_VERSION
from jupyter_cache.cache.db import DB_NAME, OrmBase
from sqlalchemy import create_engine

LOCK_NAME = "create.lock"


def prepare(path: str | os.PathLike) -> Path:
    """Make ``path`` a complete jupyter-cache folder (idempotent, safe from several processes at once)."""
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / LOCK_NAME, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        engine = create_engine(f"sqlite:///{folder / DB_NAME}")
        try:
            OrmBase.metadata.create_all(engine)  # checks first: adds only missing tables
        finally:
            engine.dispose()
        version = folder / "__version__.txt"
        if not version.is_file():
            version.write_text(JUPYTER_CACHE_VERSION)
    return folder


def _prepare_for_build(app) -> None:
    config = getattr(app.env, "mystnb_config", None)
    if config is None or config.execution_mode != "cache":
        return
    prepare(config.execution_cache_path)


def setup(app):
    # myst-nb resolves execution_cache_path on builder-inited at the default priority (500)
    app.connect("builder-inited", _prepare_for_build, priority=900)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
