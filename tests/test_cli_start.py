"""The CLI starts without importing the verbs it does not run (cli/main.py's registry)."""

from __future__ import annotations

import json
import subprocess
import sys

from replicalab.cli.main import VERBS, load_verb

_PROBE = """
import sys, json
from replicalab.cli.main import main
sys.argv = ["replicalab", *json.loads(sys.argv[1])]
try:
    main()
except SystemExit:
    pass
mods = sorted(m for m in sys.modules if m.startswith("replicalab.cli."))
print(json.dumps({"cli": mods, "numpy": "numpy" in sys.modules,
                  "pyarrow": "pyarrow" in sys.modules}), file=sys.stderr)
"""


def _loaded(*args: str) -> dict:
    p = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(list(args))],
                       capture_output=True, text=True, timeout=60)
    return json.loads(p.stderr.strip().splitlines()[-1])


def test_help_imports_no_verb():
    got = _loaded("--help")
    assert got["cli"] == ["replicalab.cli.errors", "replicalab.cli.main"], got
    assert not got["numpy"] and not got["pyarrow"]


def test_a_verb_imports_its_own_module_only():
    got = _loaded("check", "--help")
    others = {v.module for v in VERBS} - {"replicalab.cli.check"}
    assert "replicalab.cli.check" in got["cli"]
    assert not others & set(got["cli"]), got


def test_every_registry_line_loads_a_command_with_help():
    names = dict.fromkeys(v.name for v in VERBS)
    for name in names:
        cmd = load_verb(name)
        assert cmd is not None and cmd.name == name, name
        assert next(v.summary for v in VERBS if v.name == name), name
    assert load_verb("no-such-verb") is None
    assert "live" in load_verb("placement").commands  # the second placement line
