"""pipeline.links.guard: the marker names the page in hand (and only while it is in hand), a torn or
missing marker names nothing, and a parse past the CPU limit ends its process inside native code."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from pipeline.links import guard


def test_the_marker_names_the_page_in_hand_and_nothing_between_pages(tmp_path: Path) -> None:
    marker = tmp_path / "m"
    g = guard.ParseGuard(marker, cpu_limit_s=0)
    assert guard.culprit(marker) is None
    with g.page(7, "http://a.test/é?q=1"):
        assert guard.culprit(marker) == guard.Culprit(7, "http://a.test/é?q=1")
        with g.page(8, "http://a.test/"):  # a shorter URL over a longer one: the length field decides
            assert guard.culprit(marker) == guard.Culprit(8, "http://a.test/")
    assert guard.culprit(marker) is None
    g.close()


def test_missing_or_torn_markers_name_nothing(tmp_path: Path) -> None:
    assert guard.culprit(tmp_path / "absent") is None
    (tmp_path / "short").write_bytes(b"\x00\x01")
    assert guard.culprit(tmp_path / "short") is None
    torn = guard._HEAD.pack(3, 50) + b"http://a.test/"  # says 50 bytes, holds 14
    (tmp_path / "torn").write_bytes(torn)
    assert guard.culprit(tmp_path / "torn") is None


def test_how_a_parser_process_ended_in_words() -> None:
    assert guard.describe_death(-signal.SIGPROF, cpu_limit_s=2.5) == "the parse used more than 2.5 s of CPU"
    assert guard.describe_death(-signal.SIGSEGV, cpu_limit_s=2.5) == "the parser process died of SIGSEGV"
    assert guard.describe_death(None, cpu_limit_s=1) == "the parser process stopped answering and was killed"
    assert guard.describe_death(3, cpu_limit_s=1) == "the parser process exited with code 3"


def test_a_parse_past_the_cpu_limit_ends_the_process_inside_the_parser(tmp_path: Path) -> None:
    """lexbor on 60,000 nested <div> runs for seconds in one native call, where no Python signal
    handler could run; the timer's default action ends the process there, and the marker names the page."""
    marker = tmp_path / "m"
    script = (
        "import sys\n"
        "from pipeline.links import extract, guard\n"
        "g = guard.ParseGuard(sys.argv[1], cpu_limit_s=0.2)\n"
        "body = b'<div>' * 60000\n"
        "with g.page(42, 'http://bomb.test/'):\n"
        "    extract.extract(body, base_url='http://bomb.test/', content_type='text/html', max_anchor=0)\n"
        "print('survived')\n"
    )
    proc = subprocess.run([sys.executable, "-c", script, str(marker)], capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGPROF, proc.stderr.decode()[-500:]
    assert b"survived" not in proc.stdout
    assert guard.culprit(marker) == guard.Culprit(42, "http://bomb.test/")
