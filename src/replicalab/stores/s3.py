"""``s3://`` — any S3-compatible object store (AWS S3, Cloudflare R2, Ceph RGW, MinIO), in real
time, through obstore (the Rust ``object_store`` crate; chosen by measured throughput, see
``benchmarks/s3_clients.py`` and docs/object-stores.md).

URL: ``s3://[ACCESS_KEY:SECRET@]HOST[:PORT]/BUCKET[?endpoints=H:P,H:P&node_regions=US-E,US-W,EU
&regions=dc3&read=nearest|random&timeout_ms=2000&region=us-east-1&style=path|virtual&tls=1
&tls_ca=PATH&object_bytes=1024&conditional_writes=1|0&profile=NAME]`` (what ``replicalab
cluster up minio`` prints, one endpoint per MinIO site; a store replicalab did not start
names one endpoint, e.g. ``s3://s3.eu-west-1.amazonaws.com/my-bucket?tls=1&region=eu-west-1``;
the port defaults to 443 with TLS, else 80).

Each element ``domain/item/attribute`` is the object of that key in the bucket; its body is
the value, padded with filler after a NUL byte to ``object_bytes`` (the workload knob for
object size, 0 = no padding; a read returns the value before the NUL). The first endpoint is
the *home* site: writes, conditional writes, deletes and consistent reads go there (S3 reads
are strongly consistent after a write at the same endpoint). An eventual read asks the
site a client is placed in (``nearest``; with MinIO site replication that site receives
writes asynchronously, so it may be stale) or one chosen at random per client. With one
endpoint both reads ask it.

Conditional writes: a write expecting a key absent is a PUT with ``If-None-Match: *``; one
expecting a value reads the object (its body and ETag) at home, compares, and PUTs with
``If-Match: <ETag>``: the endpoint refuses (412) if the object changed in between, so the
compare and the set are one step there, as far as the endpoint keeps its promise (MinIO on
a versioned bucket does not against a concurrent plain PUT: docs/object-stores.md, "A
conditional PUT beside a plain PUT"). One key per conditional write: S3 has no
multi-object atomicity, so atomic multi-element writes and multi-element reads are not
declared. An endpoint without conditional writes: ``conditional_writes=0`` (the capability
is then not declared and a conditional write is refused in one line); one that answers 501
to them is refused the same way.

Transactions (``transact``, with conditional writes): every key read at home with its
ETag, the micro-operations played out, then one conditional PUT per key written; a first
PUT refused aborts it, a later one leaves it committed in part (an unknown outcome): S3 has
no multi-object atomicity, so its promised isolation is none (the minio kind record).

Credentials, first found wins: the URL's user part (access key and secret, percent-encoded),
the environment (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``),
then an AWS profile (``profile=NAME`` or ``AWS_PROFILE``, read by boto3 from
``~/.aws/config`` and ``~/.aws/credentials``). They are held in memory only: the store's
description and every message show the URL with the secret masked.

No client-side retries: a failure shows up as a failed or unknown operation in the history,
not as one slow success. A request with no answer within ``timeout_ms`` raises Unavailable.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit, urlunsplit

import obstore
from obstore import exceptions as obx
from obstore.store import S3Store as _ObStore

from replicalab.runtime import RealRuntime
from replicalab.stores.base import (
    ABSENT,
    ConditionFailed,
    Feature,
    MicroOp,
    ReadResult,
    StoreError,
    StoreInfo,
    TxnAborted,
    Unavailable,
    Unsupported,
    WriteResult,
    redact_url,
)
from replicalab.stores.txnops import check_ops, keys_of, play
from replicalab.stores.url import Endpoint, parse_store_url

MAX_OBJECT_BYTES = 1 << 20  # the workload knob's upper end (1 MiB)
_PAD = b"\0"
_FILL = b"replicalab-object-filler."
_STYLES = ("path", "virtual")
_EXTRA = ("region", "style", "object_bytes", "conditional_writes", "profile")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
# obstore raises Python's own FileNotFoundError for a missing object
_NOT_FOUND = (obx.NotFoundError, FileNotFoundError)
_REFUSED_CONDITION = (obx.PreconditionError, obx.AlreadyExistsError, FileExistsError,
                      *_NOT_FOUND)  # If-Match on a missing object: 404
# what a transport error says when nothing came back (the outcome is unknown)
_NO_ANSWER = ("timed out", "timeout", "error sending request", "connection", "broken pipe",
              "reset by peer", "incomplete", "http2", "hyper", "io error", "eof")


def _with_default_port(url: str) -> str:
    """Return ``url`` with port 443 (``tls=1``) or 80 added when it names none."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        return url  # parse_store_url names the bad port
    if port or not parts.hostname:
        return url
    tls = parse_qs(parts.query).get("tls", [""])[-1] in ("1", "true", "yes")
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = (userinfo + "@" if userinfo else "") + f"{parts.hostname}:{443 if tls else 80}"
    return urlunsplit(parts._replace(netloc=netloc))


@dataclass(frozen=True)
class S3Credentials:
    """An access key and its secret (never shown), and a session token, or a profile."""

    access_key: str | None = None
    secret: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    profile: str | None = None
    source: str = "none"  # url | environment | profile | none (anonymous)


def resolve_credentials(user: str | None, secret: str | None, profile: str | None
                        ) -> S3Credentials:
    """Return the credentials to sign with: the URL's, else the environment's, else the
    named (or ``AWS_PROFILE``) profile, else none (ValueError naming a half-given pair)."""
    if user is not None or secret is not None:
        if not user or not secret:
            raise ValueError("the s3:// URL gives an access key without its secret (or the "
                             "other way round); use s3://ACCESS_KEY:SECRET@HOST/BUCKET or set "
                             "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
        return S3Credentials(user, secret, source="url")
    env_key, env_secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get(
        "AWS_SECRET_ACCESS_KEY")
    if env_key and env_secret and profile is None:
        return S3Credentials(env_key, env_secret, os.environ.get("AWS_SESSION_TOKEN") or None,
                             source="environment")
    profile = profile or os.environ.get("AWS_PROFILE") or None
    if profile is not None:
        return S3Credentials(profile=profile, source="profile")
    return S3Credentials()


def _profile_provider(profile: str) -> Any:
    """Return an obstore credential provider reading AWS profile ``profile`` through boto3
    (ValueError naming the fix when boto3 is missing or the profile unknown)."""
    try:
        import boto3
        from botocore.exceptions import BotoCoreError
        from obstore.auth.boto3 import Boto3CredentialProvider
    except ImportError:
        raise ValueError(f"profile={profile!r} needs boto3 to read ~/.aws/config; pip install "
                         "boto3, or give the keys in the URL or AWS_ACCESS_KEY_ID/"
                         "AWS_SECRET_ACCESS_KEY") from None
    try:
        return Boto3CredentialProvider(boto3.Session(profile_name=profile))
    except (BotoCoreError, AttributeError) as err:
        raise ValueError(f"AWS profile {profile!r}: {err}; name a profile of ~/.aws/config "
                         "or ~/.aws/credentials") from None


def _decode(body: bytes) -> str:
    """Return the value held in an object's ``body`` (the part before any padding)."""
    return body.split(_PAD, 1)[0].decode("utf-8", errors="replace")


def encode(value: str, object_bytes: int) -> bytes:
    """Return the body of an object holding ``value``, padded to ``object_bytes`` (no padding
    when the value is as long or ``object_bytes`` is 0)."""
    raw = value.encode()
    if object_bytes <= len(raw):
        return raw
    fill = object_bytes - len(raw) - 1
    return raw + _PAD + (_FILL * (fill // len(_FILL) + 1))[:fill]


def _text(err: BaseException) -> str:
    """Return ``err`` in one short line: obstore's message without its debug dump."""
    return " ".join(str(err).split("Debug source")[0].split())[:300] or type(err).__name__


def _refused(err: BaseException) -> bool:
    return isinstance(err, obx.UnauthenticatedError | obx.PermissionDeniedError) or any(
        code in str(err) for code in ("InvalidAccessKeyId", "SignatureDoesNotMatch",
                                      "AccessDenied", "403 Forbidden", "401 Unauthorized"))


def _no_answer(err: BaseException) -> bool:
    text = str(err).lower()
    if re.search(r"status code: 5\d\d", text):
        return True  # the endpoint failed while handling it: it may have been applied
    return isinstance(err, obx.GenericError | OSError) and any(w in text for w in _NO_ANSWER)


class S3Store:
    """An opened S3-compatible endpoint (or several MinIO sites of one bucket)."""

    def __init__(self, url: str, seed: int) -> None:
        url = _with_default_port(url)
        u = parse_store_url(url, "endpoints", _EXTRA, "s3://127.0.0.1:9000/BUCKET",
                            tls_scheme="")
        self.url = u
        self.shown_url = redact_url(url)
        bucket = u.credentials.database or ""
        if not _BUCKET.match(bucket):
            raise ValueError(f"{self.shown_url!r} names bucket {bucket!r}; give the bucket as "
                             "the URL's path, 3-63 lower-case letters, digits, '.' or '-': "
                             "s3://HOST:PORT/BUCKET")
        self.bucket = bucket
        if u.tls is not None and (u.tls.cert or u.tls.key):
            raise ValueError("s3:// does not take a client certificate (tls_cert/tls_key); "
                             "sign with an access key instead")
        if u.tls is not None and u.tls.ca is not None and not Path(u.tls.ca).is_file():
            raise ValueError(f"tls_ca={u.tls.ca!r}: no such file; give the path of a PEM file")
        self.region = u.query.get("region", "us-east-1") or "us-east-1"
        self.style = u.choice("style", _STYLES, "path")
        self.object_bytes = int(u.number("object_bytes", 0))
        if self.object_bytes > MAX_OBJECT_BYTES:
            raise ValueError(f"object_bytes={self.object_bytes} is over 1 MiB; give 0 (the "
                             "value alone) up to 1048576")
        self.conditional = u.choice("conditional_writes", ("1", "0"), "1") == "1"
        self.credentials = resolve_credentials(u.credentials.user, u.credentials.password,
                                               u.query.get("profile") or None)
        self._provider = (_profile_provider(self.credentials.profile)
                          if self.credentials.profile else None)
        self.sites = list(u.nodes)
        self.read_policy = u.read
        self.timeout_s = u.timeout_s
        self.rng = random.Random(seed)
        self.runtime = RealRuntime()
        features = {Feature.EVENTUAL_READ, Feature.CONSISTENT_READ, Feature.DELETE}
        if self.conditional:  # transactions commit by conditional PUTs too
            features |= {Feature.CONDITIONAL_WRITE, Feature.TRANSACTIONS}
        self.info = StoreInfo(
            url=self.shown_url, kind="s3", features=frozenset(features),
            regions=u.region_names(),
            params={"bucket": bucket, "region": self.region, "style": self.style,
                    "tls": u.tls is not None, "object_bytes": self.object_bytes,
                    "read": self.read_policy, "timeout_ms": round(self.timeout_s * 1000),
                    "conditional_writes": self.conditional,
                    "credentials": self.credentials.source,
                    "sites": {s.name: f"{s.host}:{s.port} ({s.region})" for s in self.sites},
                    "home": self.sites[0].name},
            eventual_read_served_by=(
                "the one endpoint" if len(self.sites) == 1 else
                f"the site of the client's region ({self.read_policy}); writes and "
                "consistent reads go to the first (home) site"))
        self._stores: dict[tuple[str, int], Any] = {}
        self._checked: set[tuple[str, int]] = set()

    def _endpoint_store(self, site: Endpoint) -> Any:
        """Return the obstore client of ``site`` (one per address: it pools connections)."""
        key = (site.host, site.port)
        store = self._stores.get(key)
        if store is not None:
            return store
        tls = self.url.tls is not None
        host = f"{site.host}:{site.port}"
        endpoint = f"{'https' if tls else 'http'}://{host}"
        if self.style == "virtual":
            endpoint = f"{'https' if tls else 'http'}://{self.bucket}.{host}"
        timeout = f"{max(1, round(self.timeout_s * 1000))}ms"
        client: dict[str, Any] = {"timeout": timeout, "connect_timeout": timeout,
                                  "allow_http": not tls, "pool_idle_timeout": "30s"}
        if tls and self.url.tls is not None and self.url.tls.ca is not None:
            client["root_certificate"] = Path(self.url.tls.ca).read_bytes()
        config: dict[str, Any] = {"endpoint": endpoint, "region": self.region,
                                  "virtual_hosted_style_request": self.style == "virtual",
                                  "conditional_put": "etag"}
        creds = self.credentials
        if creds.access_key is not None:
            config.update(access_key_id=creds.access_key, secret_access_key=creds.secret)
            if creds.token:
                config["session_token"] = creds.token
        elif self._provider is None:
            config["skip_signature"] = True  # anonymous: a public bucket
        try:
            store = _ObStore(self.bucket, config=config, client_options=client,  # type: ignore[arg-type]
                             retry_config={"max_retries": 0,
                                           "retry_timeout": timedelta(seconds=self.timeout_s)},
                             credential_provider=self._provider)
        except obx.BaseError as err:
            raise ValueError(f"cannot configure the s3:// client for {host}: {_text(err)}"
                             ) from None
        self._stores[key] = store
        return store

    async def connect(self, region: str | None = None) -> S3Client:
        """Return a client placed in ``region`` (its eventual reads ask that region's site);
        ValueError naming the problem when the endpoint cannot be reached, refuses the
        credentials or has no such bucket."""
        region = self.url.placed(region)
        home = self.url.via(self.sites[0], region)
        near = self.url.via(self.url.pick(self.sites, region, self.rng), region)
        client = S3Client(self, self._endpoint_store(home), home.name,
                          self._endpoint_store(near), near.name)
        for site in dict.fromkeys((home, near)):
            await self._check(site)
        return client

    async def _check(self, site: Endpoint) -> None:
        """List one key of the bucket at ``site`` once per store: the bucket exists and the
        credentials are accepted (ValueError in one line otherwise)."""
        key = (site.host, site.port)
        if key in self._checked:
            return
        store = self._endpoint_store(site)
        where = f"{site.host}:{site.port} (site {site.name} of {self.shown_url})"
        try:
            stream = obstore.list(store, prefix="replicalab-connect-check/", chunk_size=1)
            await asyncio.wait_for(stream.collect_async(), self.timeout_s + 1)
        except TimeoutError:
            raise ValueError(f"cannot reach the S3 endpoint at {where}: no answer within "
                             f"{self.timeout_s:g} s") from None
        except (obx.BaseError, OSError) as err:
            if _refused(err):
                code = _refusal(err)
                hint = ("; or the key lacks s3:ListBucket on the bucket, which a probe "
                        "needs to check it" if code == "AccessDenied"
                        and self.credentials.source != "none" else "")
                raise ValueError(f"the S3 endpoint at {where} refused the credentials "
                                 f"({self.credentials.source}): {code}; give a key it "
                                 "accepts (URL, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or "
                                 f"profile=){hint}") from None
            if "NoSuchBucket" in str(err) or isinstance(err, _NOT_FOUND):
                raise ValueError(f"the S3 endpoint at {where} has no bucket "
                                 f"{self.bucket!r}; create it first") from None
            raise ValueError(f"cannot reach the S3 endpoint at {where}: {_text(err)}"
                             ) from None
        self._checked.add(key)

    async def close(self) -> None:
        """Drop the clients (obstore closes their connections)."""
        self._stores.clear()
        self._checked.clear()


def _refusal(err: BaseException) -> str:
    """Return the S3 error code of a refusal (never the request, which names the key)."""
    m = re.search(r"<Code>([^<]+)</Code>", str(err))
    if m:
        return m.group(1)
    for code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied"):
        if code in str(err):
            return code
    return type(err).__name__


@dataclass
class S3Client:
    """One client session: the home site's client and the client of its own site."""

    store: S3Store
    home: Any
    home_name: str
    near: Any
    near_name: str

    async def _call(self, name: str, aw: Any) -> Any:
        """Return what ``aw`` returns; Unavailable when no answer came, StoreError else."""
        try:
            return await asyncio.wait_for(aw, self.store.timeout_s + 0.5)
        except TimeoutError:
            raise Unavailable(f"{name}: no answer within {self.store.timeout_s:g} s") from None
        except _REFUSED_CONDITION:
            raise
        except (obx.BaseError, OSError) as err:
            if _no_answer(err):
                raise Unavailable(f"{name}: {_text(err)}") from None
            if _refused(err):
                raise StoreError(f"{name}: the endpoint refused the request ({_refusal(err)})"
                                 ) from None
            raise StoreError(f"{name}: {_text(err)}") from None

    async def _get(self, store: Any, name: str, key: str) -> tuple[str | None, str | None]:
        """Return (value, ETag) of ``key`` at ``store`` ((None, None) if absent)."""
        async def get() -> tuple[bytes, str | None]:
            got = await obstore.get_async(store, key)
            return bytes(await got.bytes_async()), got.meta.get("e_tag")

        try:
            body, etag = await self._call(name, get())
        except _NOT_FOUND:
            return None, None
        return _decode(body), etag

    async def read(self, keys: Sequence[str], *, consistent: bool) -> ReadResult:
        """Return the value of one key: from the home site (consistent) or this client's
        own site (eventual)."""
        if len(keys) != 1:
            raise Unsupported("s3:// reads one object per call (S3 has no multi-object "
                              "read at one instant)")
        store, name = (self.home, self.home_name) if consistent else (self.near, self.near_name)
        value, _ = await self._get(store, name, keys[0])
        return ReadResult((value,), name)

    async def write(self, values: Mapping[str, str], *,
                    expect: Mapping[str, Any] | None = None) -> WriteResult:
        """PUT one object at the home site, conditionally when ``expect`` is given."""
        if len(values) != 1:
            raise Unsupported("s3:// writes one object per call (S3 has no multi-object "
                              "atomic write)")
        ((key, value),) = values.items()
        body = encode(value, self.store.object_bytes)
        name = self.home_name
        if not expect:
            await self._call(name, obstore.put_async(self.home, key, body))
            return WriteResult(name)
        if not self.store.conditional:
            raise Unsupported(f"{self.store.shown_url} was opened with conditional_writes=0: "
                              "this endpoint takes no If-Match/If-None-Match, so no cas")
        if set(expect) != {key}:
            raise Unsupported("s3:// conditional writes expect the value of the key they "
                              "write, one key per call")
        want = expect[key]
        mode: Any
        if want is ABSENT:
            mode = "create"
        else:
            have, etag = await self._get(self.home, name, key)
            if have != want or etag is None:
                raise ConditionFailed(f"{name}: {key} holds another value")
            mode = {"e_tag": etag}
        try:
            await self._call(name, obstore.put_async(self.home, key, body, mode=mode))
        except _REFUSED_CONDITION:
            raise ConditionFailed(f"{name}: condition failed") from None
        except StoreError as err:
            if "501" in str(err) or "NotImplemented" in str(err):
                raise Unsupported(f"{self.store.shown_url} refused a conditional PUT (501 "
                                  "Not Implemented): it takes no If-Match/If-None-Match; "
                                  "add conditional_writes=0") from None
            raise
        return WriteResult(name)

    async def transact(self, ops: list[MicroOp], *, gap_ns: int = 0) -> list[MicroOp]:
        """Run ``ops`` optimistically at the home site: GET every key (its body and ETag),
        play the ops out, then PUT each key written with ``If-Match`` its ETag
        (``If-None-Match: *`` if it was absent). TxnAborted when the first PUT's condition
        fails (nothing was written); StoreError (outcome unknown) when a later one fails:
        S3 writes objects one at a time, so the transaction then committed in part."""
        check_ops(ops)
        name = self.home_name
        stored: dict[str, str | None] = {}
        etags: dict[str, str | None] = {}
        for k in keys_of(ops):
            stored[k], etags[k] = await self._get(self.home, name, k)
        played = play(ops, stored)
        if gap_ns and len(ops) > 1:
            await self.store.runtime.sleep_ns(gap_ns * (len(ops) - 1))
        for n, (k, v) in enumerate(played.writes.items()):
            etag = etags[k]
            mode: Any = "create" if etag is None else {"e_tag": etag}
            try:
                await self._call(name, obstore.put_async(
                    self.home, k, encode(v, self.store.object_bytes), mode=mode))
            except _REFUSED_CONDITION:
                if n == 0:
                    raise TxnAborted(f"{name}: {k} changed since the transaction read it"
                                     ) from None
                raise StoreError(f"{name}: {k} changed since the transaction read it, after "
                                 f"{n} of its writes landed: committed in part") from None
        return played.ops

    async def delete(self, keys: Sequence[str]) -> WriteResult:
        """DELETE ``keys`` at the home site (one bulk request per 1,000)."""
        await self._call(self.home_name, obstore.delete_async(self.home, list(keys)))
        return WriteResult(self.home_name)

    async def head(self, key: str, *, consistent: bool = True) -> dict[str, Any] | None:
        """Return the metadata of ``key`` (size in bytes, ETag, last modified) or None."""
        store, name = (self.home, self.home_name) if consistent else (self.near, self.near_name)
        try:
            meta = await self._call(name, obstore.head_async(store, key))
        except _NOT_FOUND:
            return None
        return {"size_bytes": int(meta["size"]), "etag": meta.get("e_tag"),
                "last_modified": meta["last_modified"].isoformat()}

    async def list(self, prefix: str, *, consistent: bool = True) -> list[str]:
        """Return the keys under ``prefix`` (ListObjectsV2, every page)."""
        store, name = (self.home, self.home_name) if consistent else (self.near, self.near_name)
        stream = obstore.list(store, prefix=prefix, chunk_size=1000)
        got = await self._call(name, stream.collect_async())
        return sorted(m["path"] for m in got)

    async def close(self) -> None:
        """Connections belong to the store."""


def open_s3(url: str, seed: int) -> S3Store:
    """Return an S3 store for ``url``."""
    return S3Store(url, seed)
