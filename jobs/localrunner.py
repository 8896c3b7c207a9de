"""mrjob's local runner, with one reduce task per core.

On the local runner every task is a Python start with the job's imports (about 0.5 CPU-s), and mrjob splits
a reduce step's sorted input into twice as many tasks as ``--num-cores``: a small link round's extract job
started one mapper and two reducers. ``LocalRunner`` splits the sorted input into at most ``num_cores``
tasks of about equal bytes, never splitting one key's run of lines (a reducer sees all of a key's values),
so a one-core round is one mapper and one reducer. Everything else is mrjob's ``LocalMRJobRunner``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from mrjob.local import LocalMRJobRunner


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


class LocalRunner(LocalMRJobRunner):  # type: ignore[misc]
    """``LocalMRJobRunner`` whose reduce steps run at most ``num_cores`` tasks (see the module docstring)."""

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
