"""The conformance suite for store adapters: the checks every adapter must pass.

Run it against a live store from its URL (any scheme the registry can open, entry points
included)::

    from replicalab.testing import assert_conforms

    def test_my_adapter():
        assert_conforms("mystore://127.0.0.1:7000")

or from a shell: ``python -m replicalab.testing mystore://127.0.0.1:7000``. See
docs/your-store.md for the contract and a worked example.
"""

from replicalab.testing.conformance import (
    CHECKS,
    CheckResult,
    ConformanceReport,
    Failed,
    Skipped,
    assert_conforms,
    run_conformance,
)
from replicalab.testing.stall import SimStaller, Staller, TcpStaller, staller_for

__all__ = [
    "CHECKS",
    "CheckResult",
    "ConformanceReport",
    "Failed",
    "SimStaller",
    "Skipped",
    "Staller",
    "TcpStaller",
    "assert_conforms",
    "run_conformance",
    "staller_for",
]
