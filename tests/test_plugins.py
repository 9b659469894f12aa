"""A pip-installed plugin reaches the installed ``replicalab`` command: no launcher, no
monkeypatching.

The plugin is docs/examples/your-plugin (``replicalab-toyplug``): a store kind with its own
TCP key-value server, cluster driver and adapter (``toykv``), a scorecard property
(``toy-linearizable``), a protocol model (``toy-mm1``) and a checker model
(``toy-stack``), each one line of its pyproject.toml's entry points. Beside it, a package
built here (``replicalab-toyplug-wrong``) adds ``toykv-noregion://``: the toy's adapter
with the client's region dropped, which the conformance suite must fail.

The virtual environment is made once for the module: ``python -m venv --without-pip``, a
``.pth`` that adds this checkout's own virtual environment as a site directory (replicalab's
dependencies and pip, not copied), then ``pip install --no-deps --no-build-isolation -e``
of this checkout (which writes the environment's own ``bin/replicalab``) and of the two
packages. It runs offline.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from servers import server_missing

REPO = Path(__file__).resolve().parent.parent
PLUGIN = REPO / "docs" / "examples" / "your-plugin"
WRONG = {
    "pyproject.toml": textwrap.dedent("""\
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "replicalab-toyplug-wrong"
        version = "0.1.0"
        dependencies = ["replicalab-toyplug"]

        [project.entry-points."replicalab.stores"]
        toykv-noregion = "toykv_wrong:open_wrong"

        [tool.setuptools]
        py-modules = ["toykv_wrong"]
        """),
    "toykv_wrong.py": textwrap.dedent('''\
        """The toy's adapter, deliberately wrong: it checks the region's name, then
        connects every client as if it had none (straight to n0, past the WAN)."""
        from replicalab_toyplug.store import ToyKV


        class IgnoresRegion(ToyKV):
            async def connect(self, region=None):
                self.url.placed(region)  # an unknown region is still refused
                return await super().connect(None)


        def open_wrong(url, seed):
            return IgnoresRegion(url, seed)
        '''),
}
STACK_EDN = ['{:type :invoke, :f :push, :value 1, :process 0}',
             '{:type :ok, :f :push, :value 1, :process 0}',
             '{:type :invoke, :f :push, :value 2, :process 0}',
             '{:type :ok, :f :push, :value 2, :process 0}',
             '{:type :invoke, :f :pop, :value nil, :process 1}',
             '{:type :ok, :f :pop, :value 2, :process 1}']


@dataclass(frozen=True)
class Env:
    """The virtual environment: its python, its installed ``replicalab`` and a work
    directory."""

    python: Path
    command: Path
    work: Path

    def run(self, *args: str, timeout_s: float = 180) -> subprocess.CompletedProcess[str]:
        """Run the installed ``replicalab ARGS`` in the work directory."""
        return self._run([str(self.command), *args], timeout_s)

    def module(self, *args: str, timeout_s: float = 180) -> subprocess.CompletedProcess[str]:
        """Run ``python -m ARGS`` with the environment's python."""
        return self._run([str(self.python), "-m", *args], timeout_s)

    def _run(self, argv: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env["COLUMNS"] = "200"
        return subprocess.run(argv, cwd=self.work, env=env, capture_output=True, text=True,
                              timeout=timeout_s)

    def json(self, *args: str) -> dict[str, Any]:
        """Run a command with ``--json`` and return its object (exit 0 asserted)."""
        p = self.run(*args, "--json")
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)  # type: ignore[no-any-return]


def pip(python: Path, *args: str) -> None:
    """Run pip offline with ``python`` (pip comes from this checkout's environment)."""
    p = subprocess.run([str(python), "-m", "pip", *args, "-q", "--disable-pip-version-check",
                        "--no-input"], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Env:
    root = tmp_path_factory.mktemp("plugins")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")],
                   check=True, timeout=120)
    python = root / "venv" / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig."
                              "get_paths()['purelib'])"], capture_output=True, text=True,
                             check=True).stdout.strip()
    ours = sysconfig.get_paths()["purelib"]  # this checkout's environment
    Path(purelib, "_replicalab_env.pth").write_text(
        f"import site; site.addsitedir({ours!r})\n")
    plugin = shutil.copytree(PLUGIN, root / "your-plugin")  # pip builds in the source tree
    wrong = root / "wrong"
    wrong.mkdir()
    for name, text in WRONG.items():
        (wrong / name).write_text(text)
    pip(python, "install", "--no-index", "--no-deps", "--no-build-isolation",
        "-e", str(REPO), str(plugin), str(wrong))
    work = root / "work"
    work.mkdir()
    (work / "good.edn").write_text("\n".join(STACK_EDN) + "\n")  # push 1, push 2, pop -> 2
    (work / "bad.edn").write_text("\n".join(STACK_EDN).replace(":value 2, :process 1",
                                                               ":value 1, :process 1") + "\n")
    return Env(python, root / "venv" / "bin" / "replicalab", work)


def test_the_installed_command_starts_probes_and_conforms_the_plugin_store_kind(venv: Env):
    """``cluster up toykv`` (the record, its driver and its server, all the plugin's);
    ``probe`` opens the URL with the adapter the record names; the conformance suite passes
    it, client-region included, and fails the adapter that drops the region."""
    up = venv.run("cluster", "up", "toy-kv", "--nodes", "3", "--regions", "dc3", "--name",
                  "plugin-toykv", "--json")
    if up.returncode != 0 and "Toxiproxy" in up.stderr:
        server_missing("Toxiproxy", up.stderr.strip())
    assert up.returncode == 0, up.stderr
    url = json.loads(up.stdout)["url"]
    try:
        assert url.startswith("toykv://127.0.0.1:") and "node_regions=US-E,US-W,EU" in url
        (table,) = venv.json("cluster", "status", "plugin-toykv")["tables"]
        role = table["header"].index("role")
        assert [r[role] for r in table["rows"]] == ["primary", "standby", "standby"], table
        out = venv.json("probe", "--store", url, "--workload", "register", "--duration",
                        "2s", "--consistency", "consistent", "--out", "runs")
        assert out["linearizability"]["valid"] is True and out["ops"]["writes"] > 0
        assert out["store"] == url
        good = venv.module("replicalab.testing", url)
        assert good.returncode == 0, good.stdout + good.stderr
        assert "PASS client-region: clients placed in 3 regions paid the round trip" in \
            good.stdout and "10 passed, 0 failed, 2 skipped" in good.stdout, good.stdout
        bad = venv.module("replicalab.testing", "toykv-noregion" + url.removeprefix("toykv"),
                          "client-region")
        assert bad.returncode == 1, bad.stdout + bad.stderr
        assert "FAIL client-region: a client placed in US-W had its writes served by n0 " \
               "(in US-E)" in bad.stdout, bad.stdout
    finally:
        down = venv.run("cluster", "down", "plugin-toykv")
    assert down.returncode == 0, down.stderr


def test_the_installed_command_grades_the_plugin_kind_on_the_plugin_property(venv: Env):
    doc = venv.json("scorecard", "--kinds", "toykv", "--quick", "--only",
                    "toy-linearizable", "--out", "runs")
    assert doc["properties"] == ["toy-linearizable"]
    (cell,) = doc["cells"]
    assert (cell["store"], cell["prop"], cell["grade"]) == ("toykv", "toy-linearizable",
                                                            "green"), cell
    assert cell["value"].startswith("linearizable (") and cell["figures"]["ops"] > 0
    assert cell["promise"] == "consistent reads are linearizable"


def test_the_installed_command_runs_the_plugin_protocol_model(venv: Env):
    doc = venv.json("model", "toy-mm1", "--loads", "100,500", "--out", "runs")
    (curve,) = doc["curves"]
    # the closed form: s / (1 - rho), s = 1 ms: 1/0.9 and 1/0.5 ms
    assert [round(p["latency_ms"], 4) for p in curve["points"]] == [1.1111, 2.0], curve


def test_the_installed_command_checks_with_the_plugin_checker_model(venv: Env):
    good = venv.run("check", "good.edn", "--model", "toy-stack")
    assert good.returncode == 0 and "(toy-stack model): linearizable" in good.stdout, \
        good.stderr
    bad = venv.run("check", "bad.edn", "--model", "toy-stack")
    assert bad.returncode == 1 and "NOT linearizable" in bad.stdout, bad.stderr


def test_uninstalled_its_names_are_gone(venv: Env):
    """Last: pip uninstall the plugin (and the package that needs it); each name is then
    unknown, in one line with exit 2, and says how a package adds one."""
    pip(venv.python, "uninstall", "-y", "replicalab-toyplug", "replicalab-toyplug-wrong")
    gone = {
        ("check", "good.edn", "--model", "toy-stack"): "--model 'toy-stack': use one of",
        ("cluster", "up", "toykv", "--regions", "dc3"):
            "unknown cluster kind 'toykv'; use one of redis,",
        ("model", "toy-mm1"): "No such command 'toy-mm1'",
        ("scorecard", "--kinds", "sim://simpledb", "--only", "toy-linearizable"):
            "--only 'toy-linearizable' is not a property",
        ("probe", "--store", "toykv://127.0.0.1:1", "--duration", "1s"):
            "unknown store URL scheme 'toykv'",
    }
    for args, message in gone.items():
        p = venv.run(*args)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        (line,) = p.stderr.strip().splitlines()
        assert message in line, (args, line)


def test_the_page_shows_the_plugin_as_it_is():
    page = (REPO / "docs" / "your-store.md").read_text()
    for name, lang in (("pyproject.toml", "toml"), ("replicalab_toyplug/kind.py", "python")):
        text = (PLUGIN / name).read_text().rstrip()
        assert f"```{lang}\n{text}\n```" in page, f"docs/your-store.md shows an old {name}"
