"""Every extension point is an entry-point group, and replicalab's built-ins are declared in
it (pyproject.toml) exactly as the registries resolve them; a built-in name resolves without
reading any package's metadata; an installed package adds names to each group, cannot take
a built-in's, and when it fails to load breaks only its own names with one line naming it.

The package of the last tests is laid out as pip lays one out (module + ``*.dist-info``
with ``entry_points.txt``) in a directory put on ``sys.path``; tests/test_plugins.py
installs a real one with pip into a virtual environment and drives the installed command.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import Callable, Iterator
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

from replicalab import plugins
from replicalab.checkers.linearizability import registry as lin_registry
from replicalab.cluster import kinds
from replicalab.experiments import properties
from replicalab.models import registry as model_registry
from replicalab.placement import policies
from replicalab.queues import registry as queue_registry
from replicalab.stores import registry as store_registry
from replicalab.workloads import registry as workload_registry

REPO = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]


def _ours(module: str) -> bool:
    return module.startswith("replicalab.")


def shipped(group: str) -> dict[str, Any]:
    """Return {name: the object the registry resolves it to} for every built-in of
    ``group`` as the code lists it (names other tests registered at run time left out)."""
    imp = plugins.import_target
    if group == plugins.STORES:
        return {s: imp(t) for s, t in store_registry._ADAPTERS.items()}
    if group == plugins.STORE_KINDS:
        return {n: kinds.resolve(n) for n in kinds.BUILTIN}
    if group == plugins.QUEUES:
        return {s: imp(t) for s, t in {"sim": queue_registry.SIM_BACKEND,
                                        **queue_registry._BACKENDS}.items()}
    if group == plugins.WORKLOADS:
        return {n: workload_registry.get(n) for n, m in workload_registry._MODULES.items()
                if _ours(m)}
    if group == plugins.CHECKERS:
        return {n: c for n, c in lin_registry.MODELS.items() if _ours(c.__module__)}
    if group == plugins.PROPERTIES:
        return {n: properties.get(n) for n in properties.names()
                if _ours(properties.get(n).measure.__module__)}
    if group == plugins.MODELS:
        return {n: s for n, s in model_registry.MODELS.items() if _ours(s.curve.__module__)}
    assert group == plugins.PLACEMENT
    return {n: c for n, c in policies.POLICIES.items() if _ours(c.__module__)}


@pytest.mark.parametrize("group", plugins.GROUPS)
def test_each_group_declares_the_builtins_as_the_registry_resolves_them(group: str):
    code = shipped(group)
    declared = PYPROJECT.get(group, {})
    missing = sorted(set(code) - set(declared))
    assert not missing, (f"add to pyproject.toml's [project.entry-points.\"{group}\"]: "
                         + "; ".join(f"{n} = \"...\"" for n in missing))
    assert sorted(declared) == sorted(code), f"{group}: declared but not in the registry"
    for name, target in declared.items():
        assert plugins.import_target(target) is code[name], f"{group} {name} = {target}"


@pytest.mark.parametrize("group", plugins.GROUPS)
def test_importlib_metadata_lists_the_builtins_of_each_group(group: str):
    """What ``pip install -e .`` wrote is what pyproject.toml declares (a stale install:
    run pip install -e . again)."""
    ours = {ep.name: ep.value for ep in entry_points(group=group)
            if ep.dist is not None and ep.dist.name == "replicalab"}
    assert ours == PYPROJECT[group], "re-run pip install -e . (the metadata is stale)"


_NO_METADATA = """
import json, sys
from replicalab.stores.registry import open_store
from replicalab.cluster import kinds
from replicalab.queues.registry import open_queue
from replicalab.workloads import registry as workloads
from replicalab.checkers.linearizability.registry import get_model
from replicalab.experiments import properties
from replicalab.models.registry import MODELS
from replicalab.placement.policies import policy_class
open_store("sim://simpledb"); kinds.resolve("zk"); kinds.isolation_promise("etcd://h:1")
open_queue("sim://sqs"); workloads.get("register"); get_model("cas-register")
properties.get("latency"); properties.parse_only("latency,geography"); MODELS["epaxos"]
"paxos-lan" in MODELS; policy_class("cog")
print(json.dumps("importlib.metadata" in sys.modules))
"""


def test_builtin_names_resolve_without_reading_package_metadata():
    p = subprocess.run([sys.executable, "-c", _NO_METADATA], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) is False


_CHECK = """
import json, sys
from replicalab.cli.main import main
sys.argv = ["replicalab", "check", sys.argv[1], "--model", "cas-register"]
try:
    main()
except SystemExit as e:
    code = e.code
print(json.dumps([code, "importlib.metadata" in sys.modules]), file=sys.stderr)
"""


def test_check_with_a_builtin_model_reads_no_package_metadata(tmp_path: Path):
    """Importing importlib.metadata and scanning the installed packages is 0.05-0.2 s; a
    short ``replicalab check`` must not pay it."""
    h = tmp_path / "h.edn"
    h.write_text('{:type :invoke, :f :write, :value 1, :process 0}\n'
                 '{:type :ok, :f :write, :value 1, :process 0}\n')
    p = subprocess.run([sys.executable, "-c", _CHECK, str(h)], capture_output=True,
                       text=True, timeout=120)
    assert json.loads(p.stderr.strip().splitlines()[-1]) == [0, False], p.stderr + p.stdout


# --- an installed package ------------------------------------------------------------------

EPTOY = textwrap.dedent('''
    """A package adding one name to several groups, and two broken names."""
    from replicalab.checkers.linearizability.model import Model
    from replicalab.cluster.kinds import Isolation, StoreKind
    from replicalab.placement.policies import PolicyBase
    from replicalab.stores.registry import open_store


    class Stack(Model):
        name = "ep-stack"
        summary = "a stack"
        ops = ("push", "pop")

        def init(self):
            return ()

        def step(self, state, op):
            if op.f == "push":
                return True, (*state, op.value)
            if op.value is None:
                return not state, state
            return bool(state) and state[-1] == op.value, state[:-1]


    class Stay(PolicyBase):
        name = "ep-stay"


    def open_epkv(url, seed):
        """A store of this package: the simulator under another scheme."""
        return open_store("sim://simpledb", seed)


    EPKV = StoreKind(name="epkv", schemes=("epkv",), aliases=("ep-kv",),
                     driver="eptoy:NoDriver", adapter="eptoy:open_epkv",
                     isolation=(Isolation("serializable", "eptoy's docs",
                                          (("txn", "strict"),)),
                                Isolation("read-committed", "eptoy's docs")))
    TAKES_REDIS = StoreKind(name="ep-redis", schemes=("redis",), driver="eptoy:NoDriver",
                            adapter="eptoy:open_epkv")
    NOT_A_MODEL = 42
''')
ENTRY_POINTS = {
    plugins.CHECKERS: {"ep-stack": "eptoy:Stack", "ep-broken": "eptoy_gone:Stack",
                       "ep-int": "eptoy:NOT_A_MODEL", "kv": "eptoy:Stack"},
    plugins.PLACEMENT: {"ep-stay": "eptoy:Stay"},
    # the broken kind first: looking through the kinds for a scheme skips it
    plugins.STORE_KINDS: {"ep-gone": "eptoy_gone:KIND", "epkv": "eptoy:EPKV",
                          "ep-redis": "eptoy:TAKES_REDIS"},
}


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Lay out package ``replicalab-eptoy`` as pip would and put it on sys.path; every
    registry forgets what it loaded from it afterwards."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "eptoy.py").write_text(EPTOY)
    info = site / "replicalab_eptoy-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: replicalab-eptoy\n"
                                   "Version: 0.1\n")
    (info / "entry_points.txt").write_text("".join(
        f"[{g}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) + "\n"
        for g, eps in ENTRY_POINTS.items()))
    for reg in (lin_registry.MODELS, policies.POLICIES):
        monkeypatch.setattr(reg, "_items", dict(reg._items))
        monkeypatch.setattr(reg, "broken", {})
    for name in ("_KINDS", "_BY_NAME", "_ISOLATION"):
        monkeypatch.setattr(kinds, name, dict(getattr(kinds, name)))
    monkeypatch.setattr(store_registry, "_OPENERS", dict(store_registry._OPENERS))
    monkeypatch.syspath_prepend(str(site))  # a new sys.path: the groups are read again
    yield site


def one_line_naming_the_package(call: Callable[[], object]) -> str:
    with pytest.raises(plugins.PluginError) as err:
        call()
    text = str(err.value)
    assert "\n" not in text and "replicalab-eptoy" in text
    return text


def test_a_package_adds_a_checker_model_and_a_broken_one_breaks_only_its_own_name(installed):
    assert "ep-stack" not in list(lin_registry.MODELS)  # nothing read before it is asked for
    assert lin_registry.get_model("ep-stack").name == "ep-stack"
    text = one_line_naming_the_package(lambda: lin_registry.get_model("ep-broken"))
    assert "'ep-broken'" in text and "ModuleNotFoundError" in text
    assert "pip uninstall replicalab-eptoy" in text
    text = one_line_naming_the_package(lambda: lin_registry.get_model("ep-int"))
    assert "which is not a Model subclass" in text
    assert type(lin_registry.get_model("kv")).__module__.startswith("replicalab.")
    listed = lin_registry.MODELS.installed()
    assert "ep-stack" in listed and "ep-broken" not in listed
    assert set(lin_registry.MODELS.broken) == {"ep-broken", "ep-int"}
    with pytest.raises(ValueError, match=r"unknown model 'nope'.*replicalab\.checkers"):
        lin_registry.get_model("nope")


def test_a_package_adds_a_placement_policy(installed):
    assert policies.policy_class("ep-stay").name == "ep-stay"
    with pytest.raises(ValueError, match="unknown policy 'nope'"):
        policies.policy_class("nope")


def test_a_package_adds_a_store_kind_whose_record_names_its_adapter_and_isolation(installed):
    """The URL opens with the adapter the record names (no replicalab.stores line), by its
    name or an alias the kind resolves, its isolation rules are the promise, and the broken
    kind and the one claiming redis:// do not get in the way."""
    store = store_registry.open_store("epkv://anywhere")
    assert store.info.kind == "sim/simpledb"
    assert kinds.resolve("ep-kv") is kinds.resolve("epkv")
    assert kinds.isolation_promise("epkv://h:1?txn=strict") == ("serializable", "eptoy's docs")
    assert kinds.isolation_promise("epkv://h:1")[0] == "read-committed"
    assert "epkv" in kinds.names(installed=True) and "ep-gone" not in kinds.names()
    text = one_line_naming_the_package(lambda: kinds.resolve("ep-gone"))
    assert "the store kind 'ep-gone'" in text
    with pytest.raises(ValueError, match="the redis:// scheme is replicalab's own"):
        kinds.resolve("ep-redis")
    assert kinds.resolve("redis").adapter == store_registry._ADAPTERS["redis"]


def test_a_broken_package_is_one_line_and_exit_2_on_the_command_line(installed: Path,
                                                                      tmp_path: Path):
    h = tmp_path / "h.edn"
    h.write_text('{:type :invoke, :f :push, :value 1, :process 0}\n'
                 '{:type :ok, :f :push, :value 1, :process 0}\n')
    env = {"PYTHONPATH": str(installed), "PATH": "/usr/bin:/bin", "COLUMNS": "200"}
    cmd = [sys.executable, "-m", "replicalab.cli.main", "check", str(h), "--model"]
    bad = subprocess.run([*cmd, "ep-broken"], capture_output=True, text=True, env=env,
                         timeout=120)
    assert bad.returncode == 2, bad.stderr
    (line,) = bad.stderr.strip().splitlines()
    assert line.startswith("error: the checker model 'ep-broken' from replicalab-eptoy")
    good = subprocess.run([*cmd, "ep-stack"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert good.returncode == 0 and "(ep-stack model): linearizable" in good.stdout, \
        good.stderr


@pytest.mark.parametrize("name", kinds.BUILTIN)
def test_each_shipped_kind_is_one_record_naming_its_adapter_and_isolation(name: str):
    """The record names the adapter stores/registry.py opens its schemes with, and the
    isolation promise of each way it runs transactions comes from the record's rules."""
    kind = kinds.resolve(name)
    assert kind.adapter is not None, f"{name}: name its adapter in the record"
    for scheme in kind.schemes:
        assert store_registry._ADAPTERS[scheme] == kind.adapter
        assert kinds.for_scheme(scheme) is kind
    assert kind.isolation, f"{name}: its transactions promise nothing?"
    for way in kind.transactions:
        url = f"{kind.schemes[0]}://127.0.0.1:1" + (f"?{way.url_params}" if way.url_params
                                                   else "")
        assert kind.isolation_for(url)[0] == way.model == kinds.isolation_promise(url)[0]
