"""S1's serial-id check, the pure part: which answer a node gets for a serial."""

from __future__ import annotations

from pipeline.transport.wire.serialcheck import SerialTable, answer


def test_held_only_by_the_fetcher_it_was_issued_to_while_outstanding() -> None:
    table = SerialTable()
    table.issue(7, "n1#0")
    assert answer(b'{"serial": 7, "fetcher": "n1#0"}', table.holder) == {"serial": 7, "held": True}
    assert answer(b'{"serial": 7, "fetcher": "n2#0"}', table.holder)["held"] is False  # re-issued elsewhere
    assert answer(b'{"serial": 8, "fetcher": "n1#0"}', table.holder)["held"] is False  # never issued
    table.replace([(9, "n2#1")])  # 7 expired or completed at the last tick
    assert answer(b'{"serial": 7, "fetcher": "n1#0"}', table.holder)["held"] is False
    assert answer(b'{"serial": 9, "fetcher": "n2#1"}', table.holder)["held"] is True


def test_hostile_checks_get_an_error_not_an_exception() -> None:
    table = SerialTable()
    for body in (b"", b"[]", b"{", b'{"serial": "7", "fetcher": "x"}', b'{"serial": true, "fetcher": "x"}',
                 b'{"serial": 7}', b"\xff\xfe"):  # fmt: skip
        assert "error" in answer(body, table.holder), body
