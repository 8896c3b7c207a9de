"""The local runner's tasks forked from a warm interpreter (``jobs.taskfork``): which commands run there,
the module path a task gets, and a real two-step job on ``LocalRunner`` whose tasks run in their own
processes with the command's environment, and fail the step when they die."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mrjob.job import MRJob
from mrjob.step import StepFailedException

from jobs import taskfork
from jobs.localrunner import LocalRunner


class MRCountWords(MRJob):
    def mapper(self, _key: None, line: str):  # type: ignore[no-untyped-def]
        if line == "die":
            os.kill(os.getpid(), 11)  # a parser crash: the task's process dies of SIGSEGV
        if line == "burn":
            end = time.process_time() + 0.6
            while time.process_time() < end:
                pass
        for word in line.split():
            yield word, 1

    def reducer(self, word: str, counts):  # type: ignore[no-untyped-def]
        yield word, [sum(counts), os.getpid(), os.environ.get("CF_TASK_MARK", "")]


def test_only_the_jobs_own_script_under_this_interpreter_runs_in_the_fork() -> None:
    py = [sys.executable]
    assert taskfork.task_args([*py, "/w/mr_x.py", "--step-num=0", "--mapper"], python_bin=py,
                              script="/src/jobs/mr_x.py") == ["--step-num=0", "--mapper"]  # fmt: skip
    assert taskfork.task_args(["sh", "-ex", "setup.sh", *py, "mr_x.py"], python_bin=py, script="mr_x.py") is None
    assert taskfork.task_args([*py, "other.py", "--mapper"], python_bin=py, script="mr_x.py") is None
    assert taskfork.forkable(MRCountWords, py)
    assert not taskfork.forkable(MRCountWords, ["/usr/bin/python3.9"])
    assert not taskfork.forkable(type("Main", (), {"__module__": "__main__"}), py)


def test_a_task_gets_a_commands_module_path_not_its_drivers() -> None:
    base = taskfork.cold_path()
    assert base and all(p for p in base)
    assert taskfork.task_path("/wd", {"PYTHONPATH": f"/a{os.pathsep}/b"}, base)[:3] == ["/wd", "/a", "/b"]
    assert taskfork.task_path("/wd", {}, ["/lib"]) == ["/wd", "/lib"]


def _run(tmp_path: Path, lines: list[str]) -> list[tuple[str, list]]:
    src = tmp_path / "in.txt"
    src.write_text("".join(line + "\n" for line in lines))
    job = MRCountWords(args=["-r", "local", "--num-cores", "2", "--no-conf", "--no-bootstrap-mrjob",
                             "--cmdenv", "CF_TASK_MARK=set", str(src)])  # fmt: skip
    with LocalRunner(mrjob_cls=MRCountWords, **job._runner_kwargs()) as runner:
        runner.run()
        return sorted(job.parse_output(runner.cat_output()))


def test_a_real_job_runs_in_forked_tasks_with_the_commands_environment(tmp_path: Path) -> None:
    out = _run(tmp_path, ["a b a", "c a"])
    assert [(w, v[0]) for w, v in out] == [("a", 3), ("b", 1), ("c", 1)]
    assert all(v[1] != os.getpid() for _, v in out)  # each task in a process of its own
    assert {v[2] for _, v in out} == {"set"}  # --cmdenv reached the task
    assert taskfork._context is not None  # through the fork server, not as commands


def test_a_task_that_dies_fails_the_step(tmp_path: Path) -> None:
    with pytest.raises(StepFailedException):
        _run(tmp_path, ["a b", "die"])


DRIVER = """
import sys
from pathlib import Path
from tests.unit.test_taskfork import _run
_run(Path(sys.argv[1]), ["burn"])
"""


def test_a_drivers_forked_tasks_cpu_is_accounted_to_it_once_it_exits(tmp_path: Path) -> None:
    """The fork server is stopped and reaped when its process exits, so whoever waits for that process
    (a bench's CPU count) sees its tasks' CPU: a server left to exit on its own would be re-parented."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", DRIVER, str(tmp_path)], check=True, cwd=os.getcwd(), timeout=120)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime) >= 0.6


def test_each_forked_tasks_cpu_is_counted_as_it_ends(tmp_path: Path) -> None:
    """A link round's CPU (``jobs.jobrun.process_cpu``) includes its forked tasks while the fork server
    lives: the tasks are the server's children, never the driver's."""
    before = taskfork.forked_cpu_s()
    _run(tmp_path, ["burn"])
    assert taskfork.forked_cpu_s() - before >= 0.6
