"""The suite's grouping for pytest-xdist holds (tests/conftest.py): under ``--dist
loadgroup`` (what ``make test`` runs) every test carries its group in its node id, which is
what the scheduler groups by. Once it silently did not (xdist's hook ran before the one
that adds the groups; pytest 9.2 ignores the suffix): every worker started its own session
clusters and module fixtures ran once per test."""

from __future__ import annotations

import pytest


def test_this_test_is_grouped_with_its_file(request: pytest.FixtureRequest):
    mark = request.node.get_closest_marker("xdist_group")
    assert mark is not None and mark.args == ("tests/test_ci_grouping.py",)
    if getattr(request.config.option, "loadgroup", False):  # on an xdist worker
        assert request.node.nodeid.endswith("@tests/test_ci_grouping.py"), request.node.nodeid
