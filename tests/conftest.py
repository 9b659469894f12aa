"""Shared fixtures: run a probe on the simulated store without going through the CLI."""

from __future__ import annotations

import os
import signal
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

# A test run started in the background of a non-interactive shell (`nohup make test &`)
# inherits SIGINT ignored, and so would every command the Ctrl-C tests start and signal:
# Python keeps an inherited SIG_IGN and would never see the Ctrl-C. Give this process, and
# through it its children, the default disposition.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Cluster state of this test process (each pytest-xdist worker imports this file on its own)
# in a directory of its own, set before replicalab is imported (cluster/state.py reads it):
# tests never see or touch the user's clusters, nor each other's. A test that wants the
# state beside its files sets REPLICALAB_STATE_DIR itself.
os.environ["REPLICALAB_STATE_DIR"] = tempfile.mkdtemp(prefix="replicalab-state-")
os.chmod(os.environ["REPLICALAB_STATE_DIR"], 0o755)  # PostgreSQL's user reaches its data

import pytest  # noqa: E402

from replicalab.history.rundir import Run  # noqa: E402
from replicalab.workloads.base import ProbeOptions  # noqa: E402
from replicalab.workloads.runner import ProbeSpec, run_probe  # noqa: E402
from servers import Shared, need_module, running_cluster  # noqa: E402


@pytest.fixture
def probe(tmp_path: Path):
    """Return a function running a probe into tmp_path and returning its Run."""

    def run(store: str = "sim://simpledb", workload: str = "staleness", **kw) -> Run:
        opts = {k: kw.pop(k) for k in list(kw) if k in ProbeOptions.__dataclass_fields__}
        spec = ProbeSpec(store=store, workload=workload, options=ProbeOptions(**opts), **kw)
        return run_probe(spec, tmp_path / "runs")

    return run


# -- real clusters, one per kind per test worker -----------------------------------------------

CLUSTER_FIXTURES = {"redis_dc3": "redis", "postgres_dc3": "postgres", "etcd_dc3": "etcd",
                    "zookeeper_dc3": "zookeeper", "cassandra_dc3": "cassandra",
                    "minio_dc3": "minio"}


SHARED = Shared()


def cluster_kinds(item: pytest.Item | None) -> set[str]:
    """Return the kinds of shared cluster test ``item`` asks for (none for no test)."""
    names = getattr(item, "fixturenames", ())
    return {CLUSTER_FIXTURES[f] for f in names if f in CLUSTER_FIXTURES}


def _shared_cluster(kind: str, before: Callable[[], None] = lambda: None) -> tuple[Any, Path]:
    def start(stack: ExitStack) -> tuple[Any, Path]:
        before()
        return stack.enter_context(running_cluster(kind))

    return SHARED.get(kind, start)


@pytest.fixture
def redis_dc3():
    """(Cluster, root) of a 3-node Redis on dc3 links (primary in US-E), shared by all tests."""
    return _shared_cluster("redis")


@pytest.fixture
def postgres_dc3():
    """(Cluster, root) of a 3-node PostgreSQL on dc3 links (primary in US-E)."""
    return _shared_cluster("postgres")


@pytest.fixture
def etcd_dc3():
    """(Cluster, root) of a 3-member etcd on dc3 links."""
    return _shared_cluster("etcd")


@pytest.fixture
def zookeeper_dc3():
    """(Cluster, root) of a 3-server ZooKeeper ensemble on dc3 links."""
    return _shared_cluster("zookeeper")


@pytest.fixture
def cassandra_dc3():
    """(Cluster, root) of a 3-node Cassandra on dc3 links, one data centre per region."""
    return _shared_cluster("cassandra")


@pytest.fixture
def minio_dc3():
    """(Cluster, root) of three MinIO sites on dc3 links joined by site replication, once
    the background build of minio and mc (tests/minio_build.py) has made them."""
    from minio_build import wait_for_minio

    return _shared_cluster("minio", before=wait_for_minio)


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """After a test and its fixtures, bring down the shared clusters (and Ray) the next test
    does not ask for (pytest-xdist runs a group's tests one after another: each starts
    once)."""
    yield
    SHARED.keep_only(cluster_kinds(nextitem)
                     | ({"ray"} if "ray_local" in getattr(nextitem, "fixturenames", ()) else set()))


def pytest_sessionfinish(session):
    """Bring down what is still shared (an interrupted run too)."""
    SHARED.keep_only(set())


@pytest.fixture
def ray_local():
    """The ray module, initialised as a local instance of 2 CPUs that every Ray test shares
    (a start costs 10-15 s here; its daemons take CPU while idle, so it stops after the
    last Ray test); pools find it running and leave it running."""
    def start(stack: ExitStack) -> Any:
        ray = need_module("ray")
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
        stack.callback(ray.shutdown)
        return ray

    return SHARED.get("ray", start)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Group tests for pytest-xdist: those of a shared cluster on one worker (it starts once),
    those of the shared Ray instance on one worker, every other test with the rest of its
    file (module fixtures start once).

    First of the hooks: pytest-xdist 3.8 reads the groups in its own (no longer last)
    implementation of this hook, and once ran before this one, so no test was grouped:
    a session cluster started on every worker, a module fixture once per test."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        kinds = sorted(cluster_kinds(item))
        group = "cluster-" + "-".join(kinds) if kinds else item.nodeid.split("::", 1)[0]
        if not kinds and "ray_local" in names:
            group = "ray"
        item.add_marker(pytest.mark.xdist_group(group))
    # MinIO's tests last when make test builds MinIO in the background meanwhile (decided by
    # the environment, the same in every worker: xdist needs one collection order)
    if os.environ.get("REPLICALAB_MINIO_LATER") == "1":
        items[:] = sorted(items, key=lambda i: "minio_dc3" in getattr(i, "fixturenames", ()))
