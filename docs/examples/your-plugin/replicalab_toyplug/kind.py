"""The ``toykv`` store kind: one record naming its adapter, its driver and what it
promises, with where it says so."""

from replicalab.cluster.kinds import Promise, StoreKind

_DOC = "replicalab_toyplug/store.py (the toy's own rules)"

TOYKV = StoreKind(
    name="toykv", schemes=("toykv",), aliases=("toy-kv",),
    driver="replicalab_toyplug.driver:ToyDriver",
    adapter="replicalab_toyplug.store:open_toykv",
    local_reads=False, strong_reads=True,  # every read goes to n0, the one copy
    promises={
        "consistency": Promise("one copy of the data: every read returns the last write",
                               _DOC),
        "availability": Promise("nothing is served without n0", _DOC),
    },
    isolation=(),  # no transactions
)
