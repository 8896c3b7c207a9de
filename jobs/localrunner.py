"""mrjob's local and inline runners, with one map task per input file; the local runner with one reduce
task per core, no process pool, and tasks forked warm.

mrjob's local runner starts more processes than a link round needs:

- it splits a map step's input into twice as many tasks as ``--num-cores`` (the inline runner: twice the
  machine's cores), each task with its own start, store connection, seen-cache preload and combiner.
  The link jobs' drivers already write one input file per task they want (``jobs.runner.manifests``, the
  merge's candidate files), so both runners here make each input file one map task;

- it splits a reduce step's sorted input into twice as many tasks as ``--num-cores`` (a small link round's
  extract job started one mapper and two reducers). ``LocalRunner`` splits it into at most ``num_cores``
  tasks of about equal bytes, never splitting one key's run of lines (a reducer sees all of a key's values);
- it runs a step's tasks from a ``multiprocessing`` pool, a Python start per pool worker, and, where the
  runner itself runs in a spawned process (the link service's extract worker), an import of that
  process's ``__main__`` (the whole CLI) in each. A task function only starts the task's process and waits
  for it, so ``LocalRunner`` runs them from ``num_cores`` threads;
- each task is a cold interpreter start with the job's imports (0.2-0.5 CPU-s). ``LocalRunner`` forks each
  task from a fork server that imported the job once (``jobs.taskfork``), when it is given the job's class
  (``run_job`` gives it).

Everything else is mrjob's ``LocalMRJobRunner`` and ``InlineMRJobRunner``. The inline runner runs its
tasks one after another in this process anyway: ``InlineRunner`` runs one map and one reduce task a step.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from mrjob.inline import InlineMRJobRunner
from mrjob.local import LocalMRJobRunner, _TaskFailedException

from jobs import taskfork


def task_of_lines(lines: Iterable[bytes], parts: int, size: int) -> Iterator[tuple[int, bytes]]:
    """Sorted ``key<TAB>value`` lines (``size`` bytes in all), each with the task it goes to: at most
    ``parts`` tasks of about ``size / parts`` bytes, a key's lines always in one task. Pure and streaming."""
    target = max(1, -(-size // max(1, parts)))
    task = written = 0
    last = None
    for line in lines:
        key = line.split(b"\t", 1)[0]
        if written >= target and key != last and task < parts - 1:
            task, written = task + 1, 0
        written += len(line)
        last = key
        yield task, line


def file_split_size(input_paths: Iterable[str]) -> int:
    """A split size no input file exceeds: each file is one map task."""
    return max([1, *(os.stat(path).st_size for path in input_paths)])


class InlineRunner(InlineMRJobRunner):  # type: ignore[misc]
    """``InlineMRJobRunner`` with one map task per input file and one reduce task a step."""

    def _pick_mapper_split_size(self, input_paths: list[str], step_num: int) -> int:
        return file_split_size(input_paths)

    def _num_cores(self) -> int:
        return 1


class LocalRunner(LocalMRJobRunner):  # type: ignore[misc]
    """``LocalMRJobRunner`` whose reduce steps run at most ``num_cores`` tasks, from threads, each forked
    from a warm interpreter when ``mrjob_cls`` is given (see the module docstring)."""

    def __init__(self, mrjob_cls: type | None = None, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self._mrjob_cls = mrjob_cls

    def _pick_mapper_split_size(self, input_paths: list[str], step_num: int) -> int:
        return file_split_size(input_paths)

    def _invoke_task_func(self, task_type: str, step_num: int, task_num: int) -> Callable[..., None]:
        job_cls, pybin = self._mrjob_cls, self._task_python_bin()
        args = self._substep_args(step_num, task_type)
        argv = taskfork.task_args(args, python_bin=pybin, script=self._script_path or "")
        if job_cls is None or argv is None or not taskfork.forkable(job_cls, pybin):
            return super()._invoke_task_func(task_type, step_num, task_num)  # type: ignore[no-any-return]
        ctx = taskfork.fork_context([job_cls.__module__])
        num_steps = self._num_steps()

        def invoke(stdin: Any, stdout: Any, stderr: Any, wd: str, env: dict[str, str]) -> None:
            code = taskfork.run_task(ctx, job_cls, argv, stdin=stdin.name, stdout=stdout.name, stderr=stderr.name,
                                     wd=wd, env=env)  # fmt: skip
            if code != 0:
                raise _TaskFailedException(reason=f"task exited with {code}", step_num=step_num,
                                           num_steps=num_steps, task_type=task_type, task_num=task_num)  # fmt: skip

        return invoke

    def _run_multiple(self, funcs: Iterable[Callable[[], object]], num_processes: int | None = None) -> None:
        todo = list(funcs)
        workers = max(1, min(int(self._opts["num_cores"] or 1), len(todo)))
        if workers == 1:
            for func in todo:
                func()
            return
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mrjob-task") as pool:
            futures = [pool.submit(func) for func in todo]
            try:
                for future in futures:
                    future.result()
            except BaseException:
                for future in futures:  # a failed task fails the step: start no more of its tasks
                    future.cancel()
                raise

    def _split_reducer_input(self, step_num: int) -> int:
        path = self._sorted_reducer_input_path(step_num)
        size = os.stat(path).st_size
        if size == 0:
            return int(super()._split_reducer_input(step_num))  # mrjob's own handling of an empty step
        outputs = self._yield_split_fileobjs("reducer", step_num)
        dest, tasks = None, 0
        try:
            with open(path, "rb") as src:
                for task, line in task_of_lines(src, self._num_reducers(step_num), size):
                    if task == tasks:  # the next task's input begins
                        if dest is not None:
                            dest.close()
                        dest, tasks = next(outputs), tasks + 1
                    assert dest is not None
                    dest.write(line)
        finally:
            if dest is not None:
                dest.close()
        return tasks
