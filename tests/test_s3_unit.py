"""The s3:// adapter without a server: its URL, where credentials come from (and that the
secret is shown nowhere), object bodies padded to the object-size knob, and what it refuses
in one line."""

from __future__ import annotations

import asyncio

import pytest

from replicalab.stores import Feature, Unsupported, open_store
from replicalab.stores.s3 import MAX_OBJECT_BYTES, _decode, encode, resolve_credentials

SECRET = "s3cr3t/with+chars"
KEY = "AKIDEXAMPLE"


@pytest.fixture(autouse=True)
def _no_aws_env(monkeypatch):
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)


def test_url_names_sites_bucket_and_defaults():
    s = open_store("s3://127.0.0.1:9000/bucket-1?endpoints=127.0.0.1:9001,127.0.0.1:9002"
                   "&node_regions=US-E,US-W,EU&regions=dc3")
    assert s.bucket == "bucket-1"
    assert [(e.port, e.region) for e in s.sites] == [(9000, "US-E"), (9001, "US-W"),
                                                      (9002, "EU")]
    assert s.info.kind == "s3" and s.info.regions == ("US-E", "US-W", "EU")
    assert s.info.features == {Feature.EVENTUAL_READ, Feature.CONSISTENT_READ,
                               Feature.DELETE, Feature.CONDITIONAL_WRITE,
                               Feature.TRANSACTIONS}
    assert s.info.params["home"] == "n0" and s.info.params["object_bytes"] == 0
    # no port: 443 with TLS, else 80
    assert open_store("s3://s3.example.com/b12?tls=1").sites[0].port == 443
    assert open_store("s3://s3.example.com/b12").sites[0].port == 80


@pytest.mark.parametrize("url,words", [
    ("s3://127.0.0.1:9000/", "bucket"),
    ("s3://127.0.0.1:9000/Bad_Bucket", "bucket"),
    ("s3://127.0.0.1:9000/b12?object_bytes=2000000", "over 1 MiB"),
    ("s3://127.0.0.1:9000/b12?style=dns", "style"),
    ("s3://127.0.0.1:9000/b12?conditional_writes=maybe", "conditional_writes"),
    ("s3://127.0.0.1:9000/b12?tls=1&tls_cert=/etc/hostname", "client certificate"),
    ("s3://127.0.0.1:9000/b12?nope=1", "unknown parameter"),
    (f"s3://{KEY}@127.0.0.1:9000/b12", "without its secret"),
])
def test_bad_urls_are_one_line(url, words):
    with pytest.raises(ValueError, match=words) as err:
        open_store(url)
    assert "\n" not in str(err.value)


def test_credentials_url_then_environment_then_profile(monkeypatch):
    assert resolve_credentials(KEY, SECRET, None).source == "url"
    assert resolve_credentials(None, None, None).source == "none"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "ENVKEY")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "envsecret")
    got = resolve_credentials(None, None, None)
    assert (got.source, got.access_key, got.secret) == ("environment", "ENVKEY", "envsecret")
    assert resolve_credentials(KEY, SECRET, None).access_key == KEY  # the URL wins
    assert resolve_credentials(None, None, "lab").source == "profile"  # asked for by name
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.setenv("AWS_PROFILE", "other")
    assert resolve_credentials(None, None, None).profile == "other"
    assert SECRET not in repr(resolve_credentials(KEY, SECRET, None))


def test_profile_is_read_by_boto3(tmp_path, monkeypatch):
    pytest.importorskip("boto3")
    (tmp_path / "credentials").write_text("[lab]\naws_access_key_id = PROFKEY\n"
                                          f"aws_secret_access_key = {SECRET}\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    s = open_store("s3://127.0.0.1:9000/b12?profile=lab")
    assert s.info.params["credentials"] == "profile"
    assert s._provider.credentials.access_key == "PROFKEY"
    with pytest.raises(ValueError, match="profile 'missing'"):
        open_store("s3://127.0.0.1:9000/b12?profile=missing")


def test_secret_is_in_no_description():
    from urllib.parse import quote
    s = open_store(f"s3://{KEY}:{quote(SECRET, safe='')}@127.0.0.1:9000/b12")
    assert s.credentials.secret == SECRET  # percent-decoded
    shown = str(s.info.to_json()) + s.shown_url
    assert quote(SECRET, safe="") not in shown and SECRET not in shown
    assert KEY in s.shown_url  # the access key is not a secret


@pytest.mark.parametrize("size", [0, 1, 10, 1024, 65536, MAX_OBJECT_BYTES])
def test_bodies_are_padded_to_the_object_size(size):
    value = "w0-17-123456789"
    body = encode(value, size)
    assert len(body) == max(size, len(value))
    assert _decode(body) == value


def test_conditional_writes_off_is_declared_and_refused_in_one_line():
    s = open_store("s3://127.0.0.1:9000/b12?conditional_writes=0")
    assert not {Feature.CONDITIONAL_WRITE, Feature.TRANSACTIONS} & s.info.features
    from replicalab.stores.s3 import S3Client

    client = S3Client(s, None, "n0", None, "n0")
    with pytest.raises(Unsupported, match="conditional_writes=0") as err:
        asyncio.run(client.write({"d/i/a": "v"}, expect={"d/i/a": "u"}))
    assert "\n" not in str(err.value)
    for call in (client.write({"d/i/a": "v", "d/i/b": "v"}),
                 client.read(["d/i/a", "d/i/b"], consistent=True)):
        with pytest.raises(Unsupported, match="one object per call"):
            asyncio.run(call)


def test_recorded_minio_scorecard_measures_and_grades_every_cell():
    """docs/data/scorecard-2026-11-29-minio.json, what ``replicalab scorecard --kinds minio
    --regions dc3 --quick`` recorded (docs/object-stores.md): every property measured and
    graded against MinIO's documented promise, cited; no secret in the file."""
    import json
    import re
    from pathlib import Path

    from replicalab.cluster.kinds import MINIO

    path = Path(__file__).resolve().parents[1] / "docs/data/scorecard-2026-11-29-minio.json"
    text = path.read_text()
    data = json.loads(text)
    cells = {c["prop"]: c for c in data["cells"]}
    assert set(cells) == {"latency", "durability", "availability", "consistency",
                          "transactionality", "geography"}
    assert all(c["grade"] in ("green", "yellow", "red") for c in cells.values()), \
        {p: c["reason"] for p, c in cells.items() if c["grade"] == "grey"}
    for prop in ("consistency", "availability", "durability", "transactionality"):
        p = MINIO.promise(prop)
        assert p is not None and cells[prop]["source"] == p.source, prop
    assert "github.com/minio/minio" in cells["consistency"]["source"]
    assert data["stores"]["minio"]["url"].startswith("s3://replicalab:***@")
    assert not re.search(r"s3://[^:/@]+:(?!\*\*\*@)[^@/]+@", text)  # a secret in a URL


def test_list_after_write_refuses_a_store_that_cannot_list(tmp_path):
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "replicalab.cli.main", "probe", "--store",
                        "sim://simpledb", "--workload", "list-after-write", "--duration", "2s",
                        "--out", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "cannot list keys" in lines[0], p.stderr


def test_list_after_write_view_reads_the_newest_listed_object():
    from replicalab.workloads.list_after_write import ListingClient, ListingStore

    class Fake:  # a client that lists what was written, in any order
        def __init__(self) -> None:
            self.keys: list[str] = []

        async def write(self, values, *, expect=None):
            self.keys.extend(values)

        async def list(self, prefix, *, consistent=True):
            return sorted(self.keys, reverse=True)

    store = ListingStore.__new__(ListingStore)
    store.created = {}
    fake = Fake()
    client = ListingClient(store, fake)

    async def main():
        assert (await client.read(["k/i/a"], consistent=False)).values == (None,)
        for v in ("a", "b", "c"):
            await client.write({"k/i/a": v})
        assert fake.keys == ["law/n000000001/v", "law/n000000002/v", "law/n000000003/v"]
        assert (await client.read(["k/i/a"], consistent=False)).values == ("c",)
        fake.keys.pop()  # the newest not listed yet: the one before it is what is seen
        assert (await client.read(["k/i/a"], consistent=False)).values == ("b",)

    asyncio.run(main())
