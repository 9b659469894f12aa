"""Imports only point down the layering of DESIGN.md; nothing imports cli. A module named in
a string (a registry's ``"module:function"``, ``python -m module``) counts as an import."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import replicalab

ROOT = Path(replicalab.__file__).parent
# Each part and the parts it may import (besides itself), from DESIGN.md "Layering":
# cli -> report -> experiments -> workloads -> faults -> cluster -> checkers -> stores -> sim
# -> base (the probe runner drives the nemesis of faults/ on a cluster of cluster/; the
# nemesis acts on clusters; a cluster knows nothing of faults); models are a sibling on the
# base layers and sim, used by experiments (model against store), report and cli.
# plugins: the entry-point groups every registry reads (no import of the package)
# errors: ParameterError, raised where a bad value is found and named the Python way
# records: dataclasses made without compiled source (the types every command makes first)
BASE = {"history", "runtime", "regions", "plugins", "errors", "records", "arrays"}
MIDDLE = {"workloads", "faults", "cluster", "hosts"}
BELOW = {"checkers", "stores", "sim", *BASE}
SIBLINGS = {"models", "clt", "hlc", "counters", "watch", "queues", "placement"}
ALLOWED = {
    # the Python API sits beside cli at the top: cli builds its probes with it
    "api": {"report", "experiments", *SIBLINGS, *MIDDLE, *BELOW},
    # the command line parses, calls the API and prints: nothing below the API (issue 39)
    "cli": {"api"},
    "report": {"experiments", *SIBLINGS, *MIDDLE, *BELOW},
    # compositions of workloads, faults and clusters: the scorecard, compare, model against
    # store
    "experiments": {"models", *MIDDLE, *BELOW},
    "workloads": {"faults", "cluster", *BELOW},
    "faults": {"cluster", "hosts", *BELOW},
    # clusters on machines reached over SSH (DESIGN.md "Hosts"): hosts know no store
    "cluster": {"hosts", *BELOW},
    "hosts": BELOW,
    "checkers": {"stores", "sim", *BASE},
    "stores": {"sim", *BASE},
    "sim": BASE,
    "models": {"sim", "stores", *BASE},
    # siblings that need real servers or WAN links start them through cluster/
    "clt": {"hlc", "cluster", "checkers", *BASE},
    "hlc": BASE,
    "watch": {"stores", *BASE},
    "counters": {"cluster", "stores", "sim", *BASE},
    # the queue workload's central store is any Store; its checker is pure (checkers/)
    "queues": {"cluster", "stores", "sim", "checkers", "faults", *BASE},
    "placement": {"cluster", "stores", "sim", *BASE},
    # the conformance suite for store adapters: runs any Store through the registry; the
    # isolation a store's transactions promise is its kind's record (cluster/kinds.py)
    "testing": {"cluster", "stores", *BASE},
    "history": {"errors", "records", "arrays"},  # the run directory names a bad out the Python way
    "data": set(),  # package data (region matrices), no code
    "runtime": {"errors"},  # the worker pool names a bad workers or ray the Python way
    "regions": set(),
    "plugins": set(),
    "errors": set(),
    "records": set(),
    "arrays": set(),
}


def _part(path: Path) -> str:
    rel = path.relative_to(ROOT)
    return rel.parts[0].removesuffix(".py")


@functools.cache
def _parsed(text: str) -> list[ast.AST]:
    return list(ast.walk(ast.parse(text)))


def _nodes(path: Path) -> list[ast.AST]:
    """Return every node of ``path``'s syntax tree (one parse per text for all the tests)."""
    return _parsed(path.read_text())


MODULE_STRING = re.compile(r"^(replicalab(?:\.[A-Za-z_][A-Za-z0-9_]*){2,})(?::[A-Za-z_][\w.]*)?$"
                           r"|^(replicalab\.[A-Za-z_][A-Za-z0-9_]*):[A-Za-z_][\w.]*$")
"""A whole string that names a module of the package: ``replicalab.part.module``, optionally
with ``:attribute``, or ``replicalab.part:attribute`` (``replicalab.part`` alone is an
entry-point group's name, e.g. ``replicalab.stores``, not a module)."""


def string_modules(path: Path) -> list[str]:
    """Return the modules ``path`` names in strings (registry tables, ``-m`` arguments)."""
    return [m.group(1) or m.group(2) for node in _nodes(path)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and (m := MODULE_STRING.match(node.value))]


def _imports(path: Path) -> set[str]:
    """Return the parts of the package ``path`` imports, at any depth or in a string."""
    found = set()
    for node in _nodes(path):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "replicalab" and len(parts) > 1:
                found.add(parts[1])
    found |= {name.split(".")[1] for name in string_modules(path)}
    return found


def violations(root: Path = ROOT) -> list[str]:
    """Return "file imports replicalab.part" for every import, or module named in a string,
    of the package at ``root`` that points up the layering."""
    bad = []
    for path in sorted(root.rglob("*.py")):
        part = path.relative_to(root).parts[0].removesuffix(".py")
        if part not in ALLOWED:
            continue
        for target in sorted(_imports(path) - {part} - ALLOWED[part]):
            bad.append(f"{path.relative_to(root)} imports replicalab.{target}")
    return bad


def test_imports_point_down():
    bad = violations()
    assert not bad, "\n".join(bad)


def test_the_layering_check_reads_strings_and_can_fail(tmp_path: Path):
    """A workload naming a report module in a registry string, a cluster module importing
    the nemesis, and a cluster driver started as ``python -m`` from faults/ are found; a
    module of its own part or below, and an entry-point group's name, are not."""
    pkg = tmp_path / "replicalab"
    for part in ("workloads", "cluster", "faults"):
        (pkg / part).mkdir(parents=True)
    (pkg / "workloads" / "w.py").write_text(
        'SECTION = "replicalab.report.staleness:staleness_section"\n'
        'GROUP = "replicalab.stores"\nOK = "replicalab.cluster.base:up"\n')
    (pkg / "cluster" / "c.py").write_text("def f():\n    from replicalab.faults import nemesis\n")
    (pkg / "faults" / "f.py").write_text('ARGS = ["-m", "replicalab.cluster.powerfs"]\n')
    assert violations(pkg) == ["cluster/c.py imports replicalab.faults",
                               "workloads/w.py imports replicalab.report"]


def test_the_command_line_imports_nothing_below_the_api(tmp_path: Path):
    """cli/ parses, calls ``replicalab.api`` and prints: a verb module that imports a
    workload, a store or the checkers (at any depth, or names one in a string) is found;
    one that imports the API is not."""
    cli = tmp_path / "replicalab" / "cli"
    cli.mkdir(parents=True)
    (cli / "ok.py").write_text("from replicalab.api import checking\nimport replicalab.cli.x\n")
    (cli / "bad.py").write_text("def f():\n    from replicalab.stores import open_store\n"
                                'RUN = "replicalab.workloads.runner:run_probe"\n')
    (cli / "worse.py").write_text("from replicalab.checkers.txn import check\n")
    assert violations(tmp_path / "replicalab") == [
        "cli/bad.py imports replicalab.stores", "cli/bad.py imports replicalab.workloads",
        "cli/worse.py imports replicalab.checkers"]


def test_cli_reaches_drivers_and_adapters_only_through_their_registries():
    """No module of cli/ imports a cluster driver or a store adapter: it resolves a store
    kind (``cluster/kinds.py``) or opens a URL (``stores/registry.py``)."""
    from replicalab.cluster import kinds
    from replicalab.stores import registry

    drivers = {k.driver.split(":")[0] for k in map(kinds.resolve, kinds.names())
               if isinstance(k.driver, str)}
    adapters = {t.split(":")[0] for t in registry._ADAPTERS.values()}
    assert {"replicalab.cluster.redis", "replicalab.stores.redis"} <= drivers | adapters
    modules = {_module_name(p, ROOT): p for p in ROOT.rglob("*.py")}
    bad = []
    for name, path in sorted(modules.items()):
        if name.startswith("replicalab.cli"):
            for target in _module_imports(name, path, set(modules)) & (drivers | adapters):
                bad.append(f"{name} imports {target}")
    assert not bad, "\n".join(bad)


def test_every_part_has_its_place_in_the_layering():
    parts = {p.name.removesuffix(".py") for p in ROOT.iterdir()
             if (p.is_dir() and not p.name.startswith("_")) or
             (p.suffix == ".py" and p.name != "__init__.py")}
    assert parts - ALLOWED.keys() == set(), "add the new part to ALLOWED (and DESIGN.md)"


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_imports(name: str, path: Path, modules: set[str]) -> set[str]:
    """Return the modules of src/replicalab that ``path`` imports anywhere: at the top, inside
    functions (lazy imports) and under TYPE_CHECKING. ``from a import b`` names module
    ``a.b`` when there is one, else ``a``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for target in string_modules(path):  # named in a string: an import when it runs
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target.startswith("replicalab") and target != name:
            found.add(target)
    for node in _nodes(path):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                       for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target.startswith("replicalab") and target != name:
                found.add(target)
    return found


def import_cycles(root: Path = ROOT) -> list[list[str]]:
    """Return every set of modules of the package at ``root`` that import each other in a
    circle (strongly connected components of the import graph with two modules or more)."""
    paths = {_module_name(p, root): p for p in root.rglob("*.py")}
    graph = {n: _module_imports(n, p, set(paths)) for n, p in paths.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []
    for start in sorted(graph):  # Tarjan's algorithm, iterative (no recursion limit)
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


# Known cycles their owners are removing, each with the issue that removes it. Empty: a new
# cycle fails the test at once.
KNOWN_CYCLES: list[list[str]] = []


def test_no_import_cycle_between_modules():
    """No two modules import each other, directly or around a circle, lazily or not: a
    module that needs another's piece and is needed by it means the piece belongs in a
    third module below both."""
    new = [c for c in import_cycles() if c not in KNOWN_CYCLES]
    assert not new, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in new)


def test_the_cycle_finder_finds_a_cycle(tmp_path: Path):
    """The check above can fail: a circle of three modules, one import of it lazy (inside a
    function), is found, and a module that only imports into the circle is not part of it."""
    pkg = tmp_path / "replicalab"
    (pkg / "part").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "part" / "__init__.py").write_text("")
    (pkg / "part" / "a.py").write_text("def f():\n    from replicalab.part import b\n")
    (pkg / "part" / "b.py").write_text("from replicalab.other import g\n")
    (pkg / "other.py").write_text("from replicalab.part.a import f\n")
    (pkg / "leaf.py").write_text("import replicalab.part.b\n")
    assert import_cycles(pkg) == [["replicalab.other", "replicalab.part.a", "replicalab.part.b"]]
    (pkg / "part" / "a.py").write_text("def f():\n    return 1\n")
    assert import_cycles(pkg) == []


ONE_HOME = {"make_run_dir": "history/rundir.py", "named_run_dir": "history/rundir.py",
            "save_results": "history/rundir.py", "load_results": "history/rundir.py",
            "NS_PER_S": "runtime/base.py", "NS_PER_MS": "runtime/base.py"}


def _definitions(path: Path) -> set[str]:
    """Return the names in ONE_HOME that ``path`` defines (a function or an assignment, at
    any depth)."""
    found = set()
    for node in _nodes(path):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found |= {t.id for t in targets if isinstance(t, ast.Name)}
    return found & ONE_HOME.keys()


def test_run_directory_helpers_and_time_units_are_defined_once():
    """The run-directory helpers live in history/rundir.py, NS_PER_S and NS_PER_MS in
    runtime/base.py; every other module imports them."""
    where: dict[str, list[str]] = {name: [] for name in ONE_HOME}
    for path in sorted(ROOT.rglob("*.py")):
        for name in _definitions(path):
            where[name].append(path.relative_to(ROOT).as_posix())
    assert where == {name: [home] for name, home in ONE_HOME.items()}


CLI_LINES = 3_000
"""Issue 39: the command line parses, calls the API and renders; what it holds beyond that
belongs in ``api/``."""


def test_the_command_line_stays_a_thin_shell():
    lines = sum(len(p.read_text().splitlines()) for p in (ROOT / "cli").rglob("*.py"))
    assert lines <= CLI_LINES, (f"cli/ is {lines} lines (at most {CLI_LINES}): move what is "
                                "not parsing or rendering into api/")
