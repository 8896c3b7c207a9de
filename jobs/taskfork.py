"""The local runner's task processes, forked from a warm interpreter instead of started cold.

mrjob's local runner starts every task as ``python mr_job.py --step-num=N --mapper|--reducer ...``: a new
interpreter that imports the job (mrjob, the link functions, the HTML parser) before it reads a line. On
a link round of a few hundred pages that start-up is most of the round's CPU (0.55 of 0.90 CPU-s on a
400-page round of 8 segments; 2026-11-28, 6976b6d). Here a task is a process forked from a ``multiprocessing``
fork server that imported the job's module once: the same isolation (its own process, its own files,
working directory and environment; a crash or the parse guard's CPU signal kills only it and fails the
task as a failed command would), without the interpreter's start and the imports. Hadoop reuses its
task JVMs for the same reason.

A task runs in the fork only when its command is the job's own script under this interpreter; anything
else (a setup wrapper, another ``python_bin``, a job class defined in ``__main__``) runs as mrjob runs it.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
import multiprocessing
import os
import subprocess
import sys
import threading
import traceback
from collections.abc import Mapping, Sequence
from multiprocessing import forkserver, util
from multiprocessing.context import ForkServerContext
from pathlib import Path
from typing import Any, cast

_lock = threading.Lock()
_context: ForkServerContext | None = None
_task_cpu = [0.0]  # CPU seconds of the forked tasks that ended in this process (``forked_cpu_s``)


def fork_context(preload: Sequence[str]) -> ForkServerContext:
    """This process's fork server context, its preload set by the first caller (one server a process)."""
    global _context
    with _lock:
        if _context is None:
            # The server inherits this environment: numpy (the update job's seen filter) would start a BLAS
            # thread per core in it at import, and a server that forks should have none.
            os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
            ctx = cast(ForkServerContext, multiprocessing.get_context("forkserver"))
            ctx.set_forkserver_preload(["mrjob.job", *preload])
            # At this process's exit (a spawned worker's too: multiprocessing runs its finalizers, not
            # atexit) the server is stopped and reaped, so its tasks' CPU is accounted to this process
            # tree (a server left to exit on its own is re-parented, its CPU lost to whoever measures us).
            util.Finalize(None, _stop_server, exitpriority=10)
            _context = ctx
        return _context


def _stop_server() -> None:
    stop = getattr(forkserver._forkserver, "_stop", None)  # CPython's own (used by its tests)
    if stop is not None:
        with contextlib.suppress(OSError, ChildProcessError):
            stop()


def task_args(args: Sequence[str], *, python_bin: Sequence[str], script: str) -> list[str] | None:
    """The job's own arguments when ``args`` runs ``script`` under ``python_bin`` and nothing else; else
    None (the task then runs as a command). Pure."""
    n = len(python_bin)
    if list(args[:n]) != list(python_bin) or len(args) <= n or Path(args[n]).name != Path(script).name:
        return None
    return list(args[n + 1 :])


def forkable(job_cls: type | None, python_bin: Sequence[str]) -> bool:
    """A task of ``job_cls`` can run in the fork: the class is importable by name and its interpreter is
    this one."""
    return (job_cls is not None and job_cls.__module__ != "__main__"
            and list(python_bin) == [sys.executable])  # fmt: skip


@functools.cache
def cold_path() -> tuple[str, ...]:
    """The module path a cold start of this interpreter has, without a script's directory or PYTHONPATH:
    a forked task gets this, not its driver's ``sys.path`` (code the driver alone can import, as a plugin
    not shipped with ``--py-files``, stays out of reach as it would be for a command). One start, cached."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", "import json, sys; print(json.dumps(sys.path[1:]))"],
                         env=env, check=True, capture_output=True, text=True).stdout  # fmt: skip
    return tuple(json.loads(out))


def task_path(wd: str, env: Mapping[str, str], base: Sequence[str]) -> list[str]:
    """A command's module path: its script's directory (the working directory), the task environment's
    PYTHONPATH, then the interpreter's own. Pure."""
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    return [wd, *extra, *base]


def forked_cpu_s() -> float:
    """CPU seconds the tasks forked for this process have used, those that ended: they are the fork
    server's children, not this process's, so ``os.times()`` here never counts them."""
    with _lock:
        return _task_cpu[0]


def run_task(ctx: ForkServerContext, job_cls: type, argv: Sequence[str], *, stdin: str, stdout: str, stderr: str,
             wd: str, env: Mapping[str, str]) -> int:  # fmt: skip
    """Run one task in a forked process and wait for it; its exit code (negative: the signal that killed
    it). Its input, output and error streams are the files at those paths, as mrjob gives a command."""
    cpu = ctx.Value("d", 0.0, lock=False)  # the task's CPU, set as it exits (``forked_cpu_s``)
    proc = ctx.Process(target=_task_main, name="mrjob-task", daemon=False,
                       args=(job_cls.__module__, job_cls.__qualname__, list(argv), stdin, stdout, stderr, wd,
                             dict(env), task_path(wd, env, cold_path()), cpu))  # fmt: skip
    proc.start()
    proc.join()
    with _lock:
        _task_cpu[0] += cpu.value  # 0 for a task killed before it could say
    return int(proc.exitcode if proc.exitcode is not None else -1)


def _task_main(module: str, qualname: str, argv: list[str], stdin: str, stdout: str, stderr: str, wd: str,
               env: dict[str, str], path: list[str], cpu: Any) -> None:  # fmt: skip
    """The forked task: the command's working directory, environment, module path and streams, then the
    job's task (its module already imported by the fork server)."""
    os.chdir(wd)
    os.environ.clear()
    os.environ.update(env)
    sys.path[:] = path
    importlib.invalidate_caches()
    with open(stdin, "rb") as fin, open(stdout, "wb") as fout, open(stderr, "wb") as ferr:
        os.dup2(ferr.fileno(), 2)  # what the parser or a C library writes lands in the task's stderr
        os.dup2(fout.fileno(), 1)
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115 (fd 1 outlives this)
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        code = 0
        try:
            job_cls: Any = importlib.import_module(module)
            for part in qualname.split("."):
                job_cls = getattr(job_cls, part)
            job = job_cls(argv)
            job.sandbox(stdin=fin, stdout=fout, stderr=ferr)
            job.execute()
        except BaseException:  # the task fails as a failed command does: its traceback in its stderr
            ferr.write(traceback.format_exc().encode("utf-8", "replace"))
            code = 1
        finally:
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
            fout.flush()
            ferr.flush()
    t = os.times()  # a forked child's counts start at its fork
    cpu.value = t.user + t.system
    os._exit(code)  # no atexit of the fork server's modules, no multiprocessing teardown
