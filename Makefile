# Two commands set everything up: `make book` and `make test`. Both create or refresh
# the pinned virtual environment in $(VENV) first; nothing hand-installed is assumed.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# nbgrader calls `alembic` by name, so the venv's bin/ goes first on PATH. Python writes its bytecode caches
# (PYTHONDONTWRITEBYTECODE emptied; it is set on the CI machine, and uv installs no bytecode): otherwise every
# process the tests and the book start (nbgrader commands, zygotes, page kernels, servers, the students' venvs of
# the tests) compiles every module it imports from source again. Measured: importing nbgrader's command line
# 3.5 CPU s from source, 1.4 s from bytecode; the s04_3 contract's autograde 21-28 CPU s against 13-14 s; the
# fresh-clone CI 27:11 -> 20:36 (the venv's packages, then the course's own modules too). The first process to
# import a module writes its cache, so installing compiled bytecode (uv --compile-bytecode: 36 CPU s, 20 s before
# the tests start) buys nothing here.
RUN    := PATH="$(CURDIR)/$(BIN):$$PATH" PYTHONDONTWRITEBYTECODE=
JOBS   ?= 2
# pytest workers: one more than the cores. With two, the fresh-clone CI kept 2 cores 83 % busy (2034 CPU-s in
# 1220 s, 2026-12-06): the rest is waiting on the processes the tests start (nbgrader, kernels, servers,
# browsers); a third worker fills part of that wait.
TEST_JOBS ?= 3
# The venv is installed by uv (seconds; pip takes over a minute). uv's version is the one pinned in the
# lock, so `uv pip sync` keeps it; the venv's own pip installs it from PyPI first. Where uv cannot be
# installed, `make INSTALLER=pip book` installs the same lock with pip.
INSTALLER  ?= uv
UV_VERSION := $(shell sed -n 's/^uv==//p' requirements.lock)
UV         := $(BIN)/uv
.PHONY: help venv book pdf lint test test-fast test-pdf bench bench-gpu lock student-lock course-lib-wheel student-edition clean

help:
	@echo "make book      build the executable book into _build/html"
	@echo "make test      lint, then run the whole test suite (CI calls this)"
	@echo "make pdf       build the PDF edition into _build/latex/s04-diffsim.pdf (installs TeX from Debian if missing)"
	@echo "make test-pdf  make pdf, then check its text, figures and glyphs"
	@echo "make lint      ruff (lint and format check; ruff format . fixes the formatting) and basedpyright (types)"
	@echo "make test-fast library and unit tests only: no nbgrader, book, browser or slow tests (minutes)"
	@echo "make bench     run the CPU benchmarks and print their table"
	@echo "make bench-gpu run the same benchmarks on an NVIDIA GPU (installs CUDA jaxlib)"
	@echo "make lock      regenerate requirements.lock from pyproject.toml (uv; same lock when nothing changed)"
	@echo "make student-edition  write _build/student-edition/ (what students receive) and scan it for leaks"
	@echo "make course-lib-wheel course_lib's own wheel into _build/wheels/"
	@echo "make student-lock     regenerate edition/requirements.lock and requirements-exercises.lock (the edition's install files)"
	@echo "make clean     remove build outputs (keeps the venv)"
	@echo "instructors:   make regenerate | release | warm-cache | grade | feedback | grades[-canvas|-moodle] | report | stats | selftest | similarity (see README)"

venv: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
ifeq ($(INSTALLER),pip)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.lock
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
else
	$(UV) --version 2>/dev/null | grep -qx "uv $(UV_VERSION)" || \
	  $(BIN)/python -m pip install --quiet --disable-pip-version-check "uv==$(UV_VERSION)"
	$(UV) pip sync --quiet --python $(BIN)/python requirements.lock
	$(UV) pip install --quiet --python $(BIN)/python --no-deps --no-build-isolation -e .
endif
	touch $@

# book/build.py is `jupyter-book build .` that executes $(JOBS) pages at a time (see its docstring)
book: $(STAMP)
	$(RUN) $(BIN)/python book/build.py --jobs $(JOBS) --warningiserror --keep-going

# Jupyter Book's LaTeX builder with xelatex + ctex (_config.yml, latex: and latex_elements); the notebooks'
# outputs come from the same execution cache as `make book`.
pdf: $(STAMP)
	bash book/pdf/install_tex.sh
	$(RUN) $(BIN)/python book/build.py --jobs $(JOBS) --builder pdflatex --warningiserror --keep-going

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/basedpyright --pythonpath $(BIN)/python

test: lint
	$(RUN) $(BIN)/python -m pytest -n $(TEST_JOBS) --dist loadgroup -m "not pdf"

test-pdf: pdf
	$(RUN) $(BIN)/python -m pytest -m pdf -n 0

test-fast: $(STAMP)
	$(RUN) $(BIN)/python -m pytest -n $(JOBS) --dist loadgroup -m "not (nbgrader or book or browser or slow or pdf)"

bench: $(STAMP)
	$(RUN) $(BIN)/python benchmarks/run.py
	$(RUN) $(BIN)/python benchmarks/run_contact.py

bench-gpu:
	bash benchmarks/run_gpu.sh

# uv resolves pyproject.toml (with the test extra) for this venv's Python and keeps every version the
# current lock already pins that still fits: run on an unchanged pyproject.toml it writes the same lock.
# jsonschema imports rfc3987-syntax when it is installed, and that builds a grammar (lark) at import: 0.8 CPU s
# in every nbgrader, alembic, nbconvert and jupyter-book process, a fifth of nbgrader's start. It checks only
# the "iri" string format, which nothing here validates; without it jsonschema skips that one format.
NOT_LOCKED := --no-emit-package rfc3987-syntax --no-emit-package lark
lock: $(STAMP)
	$(UV) pip compile --quiet pyproject.toml --extra test --python $(BIN)/python \
	  --custom-compile-command "make lock" $(NOT_LOCKED) -o requirements.lock

# The student edition's lock: course_lib's dependencies (course_lib/pyproject.toml) and edition/requirements.in,
# at the versions requirements.lock pins (a constraint), so students compute with the grader's JAX.
student-lock: $(STAMP)
	$(UV) pip compile --quiet course_lib/pyproject.toml edition/requirements.in -c requirements.lock \
	  --python $(BIN)/python --custom-compile-command "make student-lock" -o edition/requirements.lock
	$(UV) pip compile --quiet course_lib/pyproject.toml edition/requirements-exercises.in -c edition/requirements.lock \
	  --python $(BIN)/python --custom-compile-command "make student-lock" -o edition/requirements-exercises.lock

# course_lib's own wheel (course_lib/pyproject.toml), into _build/wheels/
# (built from a copy: setuptools leaves build/ and *.egg-info in the folder it builds)
course-lib-wheel: $(STAMP)
	rm -rf _build/wheels _build/course-lib-src
	mkdir -p _build && cp -r course_lib _build/course-lib-src && rm -rf _build/course-lib-src/__pycache__
	$(UV) build --quiet --wheel --no-build-isolation --python $(BIN)/python --out-dir _build/wheels _build/course-lib-src
	rm -rf _build/course-lib-src

# the folder published each term as the students' repository (autograder/ops/student_edition.py)
# the page twins show the numbers the built book computed (_build/jupyter_execute/*.glue.json)
student-edition: book
	$(RUN) $(BIN)/python -m autograder student-edition

clean:
	rm -rf _build .pytest_cache

# --- instructor commands (see README "For instructors") ---------------------------------
.PHONY: regenerate release warm-cache grade feedback grades grades-canvas grades-moodle report stats selftest similarity

regenerate: $(STAMP)
	$(RUN) $(BIN)/python -m autograder regenerate

release: $(STAMP)
	$(RUN) $(BIN)/python -m autograder release

warm-cache: $(STAMP)
	$(RUN) $(BIN)/python -m autograder warm-cache

grade: $(STAMP)
	$(RUN) $(BIN)/python -m autograder autograde --workers $(JOBS)

feedback: $(STAMP)
	$(RUN) $(BIN)/python -m autograder feedback

grades: $(STAMP)
	$(RUN) $(BIN)/python -m autograder export --to grades.csv

grades-canvas: $(STAMP)
	$(RUN) $(BIN)/python -m autograder export --format canvas --to grades-canvas.csv

grades-moodle: $(STAMP)
	$(RUN) $(BIN)/python -m autograder export --format moodle --to grades-moodle.csv

report: $(STAMP)
	$(RUN) $(BIN)/python -m autograder report

stats: $(STAMP)
	$(RUN) $(BIN)/python -m autograder stats

selftest: $(STAMP)
	$(RUN) $(BIN)/python -m autograder selftest

similarity: $(STAMP)
	$(RUN) $(BIN)/python -m autograder similarity
