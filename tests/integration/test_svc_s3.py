"""The S3-compatible server (scripts/svc-s3.sh: s3proxy, filesystem back-end, AWS v4 auth) through s3fs:
a bucket, an atomic put, a listing, a read back and deletes, on the real server over HTTP.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import s3fs

from jobs import cluster

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def test_bucket_put_list_read_delete(s3_server: dict[str, object], unique: str) -> None:
    fs = s3fs.S3FileSystem(**s3_server)  # type: ignore[arg-type]
    bucket = f"crawlfleet-{unique}"
    # s3proxy answers GetBucketLocation for any name, so s3fs's mkdir takes a new bucket for an existing one
    # (FileExistsError): create it with the S3 call itself.
    fs.call_s3("create_bucket", Bucket=bucket)
    try:
        assert bucket in [b.rstrip("/") for b in fs.ls("")]
        key = f"{bucket}/segments/segment-00000.jsonl"
        body = b"".join(json.dumps({"url": f"http://h/{i}"}).encode() + b"\n" for i in range(2000))
        with fs.open(key, "wb") as fh:
            fh.write(body)
            fh.flush()
            # One PUT at close: until then no reader sees a partial object.
            fs.invalidate_cache()
            assert not fs.exists(key)
        fs.invalidate_cache()
        assert fs.exists(key) and fs.info(key)["size"] == len(body)
        fs.pipe(f"{bucket}/segments/segment-00001.jsonl", b"second\n")
        assert sorted(fs.ls(f"{bucket}/segments", detail=False)) == [
            f"{bucket}/segments/segment-00000.jsonl", f"{bucket}/segments/segment-00001.jsonl"]
        assert fs.cat(key) == body
        fs.rm(key)
        fs.invalidate_cache()
        assert fs.ls(f"{bucket}/segments", detail=False) == [f"{bucket}/segments/segment-00001.jsonl"]
    finally:
        # s3proxy has no GetBucketVersioning, which s3fs's rm(bucket, recursive=True) asks first:
        # delete the objects (one multi-object delete), then the empty bucket.
        fs.rm(fs.find(bucket))
        fs.rmdir(bucket)
    fs.invalidate_cache()
    assert bucket not in [b.rstrip("/") for b in fs.ls("")]


def test_the_default_bucket_is_there(s3_server: dict[str, object]) -> None:
    """svc-s3.sh makes the buckets of CRAWLFLEET_S3_BUCKETS (``crawlfleet``) at start."""
    fs = s3fs.S3FileSystem(**s3_server)  # type: ignore[arg-type]
    assert "crawlfleet" in [b.rstrip("/") for b in fs.ls("", refresh=True)]


def test_wrong_secret_is_refused(s3_server: dict[str, object]) -> None:
    fs = s3fs.S3FileSystem(**{**s3_server, "secret": "not-the-secret"}, skip_instance_cache=True)  # type: ignore[arg-type]
    with pytest.raises(PermissionError):
        fs.ls("")


def test_the_standard_aws_variables_are_enough(s3_server: dict[str, object], unique: str) -> None:
    """A client that knows only AWS_ENDPOINT_URL / AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (what
    ``svc-s3.sh env`` prints) reaches the server with plain s3fs and botocore, no crawlfleet code."""
    lines = subprocess.run([str(ROOT / "scripts" / "svc-s3.sh"), "env"], capture_output=True, text=True,
                           check=True).stdout.splitlines()  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    for line in lines:
        key, eq, value = line.partition("=")
        if eq:
            env[key] = value
    env["HOME"] = "/nonexistent"  # no ~/.aws, no client file: the variables alone
    code = (
        "import s3fs, botocore.session, sys\n"
        "b = sys.argv[1]\n"
        "fs = s3fs.S3FileSystem()\n"
        "fs.call_s3('create_bucket', Bucket=b); fs.pipe(b + '/k', b'v')\n"
        "assert botocore.session.get_session().create_client('s3').get_object(Bucket=b, Key='k')['Body'].read() == b'v'\n"
        "fs.pipe(b + '/d/x', b'1'); fs.pipe(b + '/d/y', b'2'); fs.mv(b + '/d/x', b + '/d/z')\n"
        "fs.rm(b + '/d', recursive=True); fs.rm_file(b + '/k'); fs.rmdir(b)\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, f"crawlfleet-{unique}"], env=env, capture_output=True,
                          text=True, timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
    assert cluster.s3_options(environ=env)["endpoint_url"] == env["AWS_ENDPOINT_URL"]
