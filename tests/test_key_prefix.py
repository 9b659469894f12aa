"""A probe of a store replicalab did not start keeps to its key prefix and removes its keys."""

from __future__ import annotations

import pytest

from replicalab.errors import ParameterError
from replicalab.stores import ABSENT, open_store
from replicalab.stores.prefix import PrefixedStore, check_prefix


def test_keys_go_under_the_prefix_and_cleanup_removes_exactly_them():
    inner = open_store("sim://primary")
    store = PrefixedStore(inner, "replicalab/run-1/")

    async def scenario() -> tuple:
        other = await inner.connect()
        await other.write({"user/item/a": "theirs"})  # data that is not the probe's
        c = await store.connect()
        await c.write({"probe/item/a": "1", "probe/item/b": "2"})
        await c.write({"probe/item/c": "3"}, expect={"probe/item/d": ABSENT})
        seen = (await c.read(["probe/item/a"], consistent=True)).values
        raw = (await other.read(["replicalab/run-1/probe/item/a", "probe/item/a"],
                                consistent=True)).values
        removed = await store.cleanup()
        after = (await other.read(["replicalab/run-1/probe/item/a",
                                   "replicalab/run-1/probe/item/c", "user/item/a"],
                                  consistent=True)).values
        return seen, raw, removed, after

    seen, raw, removed, after = inner.runtime.run(scenario())
    assert seen == ("1",) and raw == ("1", None)
    assert removed == 4  # a, b, c and d (asked not to exist: may have been created)
    assert after == (None, None, "theirs")  # only the probe's keys are gone


@pytest.mark.parametrize("bad", ["/abs/", "a//b/", "has space/"])
def test_a_prefix_that_cannot_hold_keys_is_refused(bad):
    with pytest.raises(ParameterError, match=r"^prefix "):  # --prefix on the CLI
        check_prefix(bad)
