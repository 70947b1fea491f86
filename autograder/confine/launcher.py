"""Start an IPython kernel confined for grading: limits, its own user, no network, Landlock; then ipykernel.

``python -m autograder.confine.launcher --scratch DIR [--uid N] [--exercise NAME] [--compile-cache DIR]
--limits JSON -f CONNECTION_FILE [ipykernel options]`` (``JSON``: every field of
:class:`autograder.confine.limits.Limits`, :meth:`~autograder.confine.limits.Limits.to_json`)

Started by :class:`autograder.confine.kernel.ConfinedKernelManager` (the trusted side, which made ``DIR``
and picked ``N``), it runs these steps before any student byte, in this order:

1. resource limits: address space, file size, no core files, CPU seconds, processes (RLIMIT_NPROC counts
   per user: with a user of its own that is exactly this kernel's processes);
2. as root: a new mount namespace in which the interpreter and the course are reachable by an unprivileged
   user, a new network namespace without any interface, then that unprivileged user for good
   (:mod:`autograder.confine.isolation`);
3. an environment from an allow-list (no gradebook password, no instructor tokens), ``DIR`` as HOME,
   TMPDIR and working folder; JAX pointed at the instructor's compilation cache, if the trusted side
   verified one (:mod:`autograder.confine.compile_cache`), and told never to write it;
4. Landlock (:mod:`autograder.confine.landlock`): read only what Python needs, write only ``DIR``, no TCP,
   no signals or abstract sockets outside the sandbox;
5. a seccomp filter (:mod:`autograder.confine.seccomp`): no ``connect`` of any socket, so no pathname Unix
   socket of a local service (munge on a Slurm node, the gradebook server, D-Bus) either.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
from pathlib import Path

from autograder.confine import compile_cache as compile_cache_
from autograder.confine import isolation, landlock, reaper, seccomp
from autograder.confine.limits import Limits

#: environment variables a grading kernel keeps; everything else (tokens, passwords, proxies) is dropped
ENV_ALLOWED = (
    "PATH",
    "LANG",
    "LANGUAGE",
    "TZ",
    "OPENBLAS_CORETYPE",
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "XLA_FLAGS",
    "PYTHONHASHSEED",
    "VIRTUAL_ENV",
    "CUDA_VISIBLE_DEVICES",
    # the pid of the process that started the kernel: ipykernel polls it and exits once that process is gone
    # (a grading worker killed from outside, e.g. with its Dask worker), instead of living on as an orphan
    "JPY_PARENT_PID",
)
ENV_ALLOWED_PREFIXES = ("LC_", "JAX_")


def _limits(text: str) -> Limits:
    try:
        return Limits.from_json(text)
    except ValueError as exc:  # argparse would only say "invalid value"
        raise argparse.ArgumentTypeError(str(exc)) from exc


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="autograder.confine.launcher", add_help=False)
    parser.add_argument("--scratch", type=Path, required=True)
    parser.add_argument("--uid", type=int)
    parser.add_argument("--exercise", default="")
    parser.add_argument("--compile-cache", type=Path, help="verified, read-only JAX compilation cache folder")
    parser.add_argument("--limits", type=_limits, required=True, help="Limits.to_json()")
    parser.add_argument("-f", dest="connection_file", type=Path, required=True)
    return parser.parse_known_args(argv)


def apply_limits(opts: argparse.Namespace) -> None:
    limits: Limits = opts.limits
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))  # no disk-filling writes
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a segfault leaves no core file behind
    # the soft limit sends SIGXCPU (the kernel dies, SafeExecute says so); the hard one SIGKILL right after
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 5))
    # with a user of its own this counts the kernel's processes and threads; otherwise the instructor's
    # own processes count too, so the cap is raised by what that user already runs
    already = 0 if opts.uid is not None else _threads_of(os.getuid())
    resource.setrlimit(resource.RLIMIT_NPROC, (limits.max_processes + already, limits.max_processes + already))


def _threads_of(uid: int) -> int:
    total = 0
    for pid in reaper.processes_of(uid):
        try:
            total += len(os.listdir(f"/proc/{pid}/task"))
        except OSError:
            continue
    return total


def kernel_environment(scratch: Path, compile_cache: Path | None = None, cache_env=compile_cache_.KERNEL_ENV) -> dict:
    """The whole environment of a grading kernel: the allow-list of this one, ``scratch`` as every home.

    ``compile_cache``: JAX's compilation cache folder, with ``cache_env`` (read-only for grading kernels;
    the instructor's filling run, :mod:`autograder.ops.warm_cache`, passes the settings that write it).
    """
    env = {k: v for k, v in os.environ.items() if k in ENV_ALLOWED or k.startswith(ENV_ALLOWED_PREFIXES)}
    for name in [k for k in env if k.startswith("JAX_PERSISTENT_CACHE") or k == "JAX_COMPILATION_CACHE_DIR"]:
        del env[name]  # only the verified, read-only cache below: a cache other kernels load is a way into them
    for var in ("HOME", "TMPDIR", "IPYTHONDIR", "MPLCONFIGDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
        env[var] = str(scratch)
    env["MPLBACKEND"] = "Agg"
    env["S04_GRADING_KERNEL"] = "1"  # course_check.GRADING_KERNEL_ENV: public checks print one line, run nothing
    if compile_cache is not None:
        env.update(compile_cache_.jax_settings(compile_cache, cache_env))
    return env


def clean_environment(scratch: Path, compile_cache: Path | None = None) -> None:
    env = kernel_environment(scratch, compile_cache)
    os.environ.clear()
    os.environ.update(env)


def confine(opts: argparse.Namespace) -> None:
    scratch = opts.scratch.resolve()
    connection = opts.connection_file.resolve()
    support = landlock.support_module(opts.exercise) if opts.exercise else ()
    cache = (opts.compile_cache.resolve(),) if opts.compile_cache else ()
    readable = (connection, *support, *cache)
    if opts.uid is not None:  # root: its own user, no network, the interpreter reachable without root
        isolation.enter_namespaces()
        isolation.make_traversable([*landlock.readable_paths(readable), landlock.ROOT, scratch], opts.uid)
        os.chown(connection, opts.uid, opts.uid)  # written by the grader, 0600; the kernel reads it
        isolation.become(opts.uid)
    clean_environment(scratch, opts.compile_cache and opts.compile_cache.resolve())
    os.chdir(scratch)
    landlock.confine(scratch, extra_readable=readable)
    seccomp.deny_connect()  # after Landlock, which sets no_new_privs


def main(argv=None, before_kernel=None) -> None:
    """Confine this process as ``argv`` says, then become the kernel; ``before_kernel()`` runs just before."""
    opts, kernel_args = parse(list(sys.argv[1:] if argv is None else argv))
    apply_limits(opts)
    if not opts.limits.sandbox:  # nothing is tamper-resistant then; the cache only makes it as fast
        if opts.compile_cache:
            os.environ.update(compile_cache_.jax_settings(opts.compile_cache))
        os.chdir(opts.scratch)
    else:
        confine(opts)
    if before_kernel is not None:
        before_kernel()
    from ipykernel import kernelapp

    sys.argv = [sys.argv[0], "-f", str(opts.connection_file), *kernel_args]
    kernelapp.launch_new_instance()


if __name__ == "__main__":
    main()
