"""The trusted side of one grading kernel: start it confined, whatever the notebook asks for, and end it whole.

:class:`ConfinedKernelManager` ignores the notebook's kernelspec (a student can name any kernel in the
metadata) and always starts :mod:`autograder.confine.launcher`, over Unix sockets in the kernel's own
scratch folder (no TCP port exists for it). :func:`confined_kernel` wraps one notebook's kernel: it
picks the kernel's user (as root), makes the scratch folder, and afterwards shuts the kernel down,
ends every process the notebook started and removes the folder.

The launcher normally runs forked from this process's warm zygote (:mod:`autograder.confine.zygote`,
:class:`ForkingProvisioner`): the same steps and the same command line, without a new interpreter and its
imports. Where no zygote is available the launcher is started as a process of its own.
"""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from contextlib import contextmanager
from pathlib import Path

import zmq
import zmq.asyncio
from jupyter_client.kernelspec import KernelSpec
from jupyter_client.manager import AsyncKernelManager
from jupyter_client.provisioning import LocalProvisioner
from jupyter_client.utils import run_sync

from autograder.confine import isolation, reaper, zygote as zygote_
from autograder.confine.zygote_registry import KERNEL_ZYGOTES
from autograder.confine.limits import Limits, require_sandbox


#: largest message the grader accepts from a kernel: a legitimate result record is under 25 MB (10^6 numbers
#: per array); a larger message drops the connection (its cell then has no record and scores zero) instead of
#: filling the trusted process's memory
MAX_MESSAGE_BYTES = 64 * 2**20


class ForkingProvisioner(LocalProvisioner):
    """jupyter_client's local provisioner, but the launcher is forked from a zygote instead of started."""

    zygote: zygote_.Zygote

    async def launch_kernel(self, cmd: list[str], **kwargs):
        if cmd[0] != sys.executable or tuple(cmd[1:3]) != zygote_.LAUNCHER_PREFIX:
            raise RuntimeError(f"not the grading launcher: {cmd[:3]}")
        try:
            self.process = self.zygote.fork(cmd[3:])
        except (OSError, RuntimeError) as exc:  # the zygote died (or hung): this kernel starts the old way
            self.log.warning("kernel zygote failed (%s: %s); launching this kernel instead", type(exc).__name__, exc)
            return await super().launch_kernel(cmd, **kwargs)
        self.pid = self.pgid = self.process.pid  # the child called setsid() before its pid was sent
        self.cwd = kwargs.get("cwd")
        return self.connection_info


class ConfinedKernelManager(AsyncKernelManager):
    """An ``AsyncKernelManager`` whose kernel is always the confined launcher (set :attr:`launcher_argv`).

    With :attr:`fork` set, the launcher is forked from this process's zygote for :attr:`compile_cache`
    (:class:`ForkingProvisioner`), started on the first kernel; without one it is started as a process.
    """

    launcher_argv: list[str] = []
    fork = False
    compile_cache: Path | None = None
    grading_log = None
    _client_contexts: list = []

    async def _async_pre_start_kernel(self, **kw):
        zygote = None
        if self.fork and self.provisioner is None:  # a restart keeps the provisioner it has
            zygote = KERNEL_ZYGOTES.get(self.compile_cache, self.grading_log)
        if zygote is not None:
            self.kernel_id = self.kernel_id or kw.pop("kernel_id", str(uuid.uuid4()))
            self.provisioner = ForkingProvisioner(kernel_id=self.kernel_id, kernel_spec=self.kernel_spec, parent=self)
            self.provisioner.zygote = zygote
        return await super()._async_pre_start_kernel(**kw)

    @property
    def kernel_spec(self) -> KernelSpec:
        return KernelSpec(
            argv=[*self.launcher_argv, "-f", "{connection_file}"],
            language="python",
            display_name="Python 3 (grading, confined)",
            env={},
        )

    def client(self, **kwargs):
        context = zmq.asyncio.Context()
        context.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)  # a default for every socket of this context
        self._client_contexts = [*self._client_contexts, context]
        return super().client(context=context, **kwargs)


def launcher_argv(
    scratch: Path, uid: int | None, exercise: str, limits: Limits, compile_cache: Path | None = None
) -> list[str]:
    return [
        sys.executable,
        "-m",
        "autograder.confine.launcher",
        "--scratch",
        str(scratch),
        *(["--uid", str(uid)] if uid is not None else []),
        *(["--exercise", exercise] if exercise else []),
        *(["--compile-cache", str(compile_cache)] if compile_cache else []),
        "--limits",
        limits.to_json(),
    ]


@contextmanager
def confined_kernel(
    exercise: str, limits: Limits, compile_cache: Path | None = None, fork: bool = True, log=None, **manager_options
):
    """A kernel manager (not started) for grading ``exercise``; on exit nothing of that kernel is left.

    ``compile_cache``: a JAX compilation cache folder the caller has verified
    (:func:`autograder.confine.compile_cache.verified_entries`); the kernel reads it and never writes it.
    ``fork``: fork the kernel from this process's zygote (started on first use) when one can run.
    """
    require_sandbox(limits)
    uid = isolation.pick_uid() if limits.sandbox and isolation.is_root() else None
    scratch = isolation.prepare_scratch(uid)
    km = ConfinedKernelManager(
        kernel_name="python3",
        transport="ipc",
        ip=str(scratch / "kernel"),
        connection_file=str(scratch / "connection.json"),
        autorestart=False,
        **manager_options,
    )
    km.launcher_argv = launcher_argv(scratch, uid, exercise, limits, compile_cache)
    km.fork, km.compile_cache, km.grading_log = fork, compile_cache, log
    try:
        yield km
    finally:
        end_kernel(km, uid)
        shutil.rmtree(scratch, ignore_errors=True)


def end_kernel(km: ConfinedKernelManager, uid: int | None) -> None:
    """Shut the kernel down now and end every process it started (see :mod:`autograder.confine.isolation`).

    The kernel's process group is looked up before the shutdown, while its leader still exists.
    """
    pid = getattr(getattr(km, "provisioner", None), "pid", None)
    group = None
    if pid:
        try:
            group = os.getpgid(pid)
        except ProcessLookupError:
            pass
    try:
        if km.has_kernel:
            run_sync(km.shutdown_kernel)(now=True)
    except Exception:  # noqa: BLE001 - a kernel in any state must still be ended below
        pass
    if uid is not None:
        reaper.kill_user(uid)  # everything it started, also what left its session
    elif group is not None:  # not root: its process group (a child that called setsid can escape: instructors page)
        reaper.kill_group(group)
    try:
        run_sync(km.cleanup_resources)()
    except Exception:  # noqa: BLE001
        pass
    for context in km._client_contexts:  # ours, not the client's: it would not close them
        context.destroy(linger=0)
