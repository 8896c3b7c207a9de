"""``crawlfleet bench s5fleet`` end to end on a tiny web: a real fleet crawl records segments and rounds,
the real link pipeline replays them into HBase behind the delaying proxy, and the dedup counters say
what each configuration is (no figures judged: a bench's numbers are for the bench)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]


def bench(*args: str) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "pipeline.cli", "bench", "s5fleet", "--json", *args],
                          capture_output=True, text=True, timeout=540, cwd=ROOT)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(json.loads(proc.stdout[proc.stdout.index("{") :]))  # one indented JSON object


def test_bench_s5fleet_records_a_crawl_and_replays_it(hbase_thrift: tuple[str, int], rabbitmq: str,
                                                      tmp_path: Path) -> None:  # fmt: skip
    keep = tmp_path / "segments"
    out = bench("--hosts", "4", "--pages", "12", "--workers", "1", "--batch-sizes", "1,50", "--latency-ms", "1",
                "--latency-sweep", "0", "--repeat", "1", "--keep-segments", str(keep),
                "--work-dir", str(tmp_path / "work"))  # fmt: skip
    assert out["same_new_urls"] is True and out["new_urls"] > 0
    assert out["input"]["pages"] > 0 and out["input"]["rounds"] >= 1
    runs = out["at_1ms"]
    base, lru1, lru50, batched = (runs[k] for k in ("baseline_no_lru_per_url", "lru_per_url", "lru_batch_50",
                                                    "no_lru_batch_500"))  # fmt: skip
    # S5's baseline: no LRU, one store call per candidate URL.
    assert base["local_hits"] == 0 and base["store_calls"] == base["remote_lookups"] == base["candidates"]
    assert base["throughput_x"] == 1.0
    # The LRU answers every repeat: only first sightings reach the (fresh) store, and they are the new URLs.
    assert lru1["local_hits"] > 0 and lru1["remote_lookups"] == lru1["new"] == out["new_urls"]
    # Batching: fewer calls for the same look-ups.
    assert lru50["store_calls"] < lru1["store_calls"]
    assert batched["remote_lookups"] == base["remote_lookups"] and batched["store_calls"] < base["store_calls"]
    assert set(out["batch_sweep_pages_per_s"]) == {"1", "50"} and out["best_batch_size"] in (1, 50)
    assert {"baseline_no_lru_per_url", "production", "production_x"} <= set(out["latency_sweep"]["0ms"])
    assert all(r["thrift_connections"] for r in runs.values())  # every run went through the proxy

    # The kept set replays alone, in the same rounds, to the same new URLs.
    assert (keep / "rounds.json").exists() and (keep / "rules.json").exists()
    again = bench("--segments", str(keep), "--batch-sizes", "50", "--latency-ms", "0", "--latency-sweep", "",
                  "--repeat", "1", "--work-dir", str(tmp_path / "work2"))  # fmt: skip
    assert again["input"]["recorded"] == str(keep)
    assert (again["input"]["rounds"], again["input"]["pages"]) == (out["input"]["rounds"], out["input"]["pages"])
    assert again["new_urls"] == out["new_urls"] and again["same_new_urls"] is True
