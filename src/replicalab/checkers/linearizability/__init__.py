"""Linearizability checking (pure, no I/O): the public entry of the checker.

``check(ops, model)`` searches a history of :class:`LinOp` with Wing–Gong–Lowe's algorithm
per independent part and returns a :class:`CheckResult`; ``check_history(h, model)`` does
the same for a recorded History. Models are found by name in the registry (``MODELS``,
``get_model``; a new data type is a :class:`Model` subclass plus one ``register_model``
line). The modules, each with one job:

* ``ops``: the operation (``LinOp``), the ``Verdict``, outcomes and the order of events;
* ``model``: the ``Model`` contract every data type follows;
* ``register_models``: ``register``, ``cas-register``, ``kv``;
* ``datatype_models``: ``set``, ``fifo-queue``, ``counter``, ``mutex``;
* ``registry``: the models by name;
* ``search``: the Wing–Gong–Lowe search of one part (register core and any model);
* ``explain``: 1-minimal counterexamples and their explanation;
* ``columns``: a history as the native core's int64 columns;
* ``checker``: the pipeline (``check``: split, search, shrink, explain; natively when it can);
* ``from_history``, ``from_file``, ``from_queue``: a recorded History, a history file's
  ops and a queue run's record as LinOps.

The names below are imported on first use (PEP 562, as :mod:`replicalab.history` does), so
importing one module of the package (``ops`` for ``Verdict``) pulls in nothing else, and
``check_history`` does not bring numpy into a ``replicalab check`` of a file.
"""

from __future__ import annotations

from replicalab import lazy_exports

_WHERE = {
    "CheckResult": "checker", "DEFAULT_CACHE_BYTES": "checker", "PartResult": "checker",
    "PartSearch": "checker", "check": "checker",
    "Clock": "explain",
    "check_history": "from_history", "ops_from_history": "from_history",
    "ops_from_file": "from_file",
    "queue_ops": "from_queue",
    "Model": "model",
    "LinOp": "ops", "UNRECORDED": "ops", "Verdict": "ops",
    "MODELS": "registry", "get_model": "registry", "register_model": "registry",
}

__all__ = sorted(_WHERE)

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
