"""The simulator's native core (Rust, in ``replicalab_native``), used when it is built.

The simulated store's schemes keep their Python implementation as the reference; when the
native module is importable and the store runs in virtual time, the message handling of a
call runs in native code instead, step for step and draw for draw the same, so a seed gives
the same history either way (``tests/test_sim_native.py`` compares them). Set
``REPLICALAB_SIM_NATIVE=0`` to run the Python implementation.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from replicalab.runtime import VirtualRuntime
from replicalab.sim.random import NativeStream, Stream

try:
    from replicalab_native import ReadCore, SimNode, SimpleDbCore
except ImportError:  # not built (make native): the Python implementation runs
    ReadCore = SimNode = SimpleDbCore = None


def wanted() -> bool:
    """Return True if the native core is built and not turned off by the environment."""
    return NativeStream is not None and os.environ.get("REPLICALAB_SIM_NATIVE", "1") != "0"


def stream_for(rng: np.random.Generator, virtual: bool) -> Any:
    """Return the random stream a simulated store draws from: the native one (the same
    sequence of draws) when the native core will run, else :class:`Stream`."""
    return NativeStream(rng) if virtual and wanted() else Stream(rng)


def runs_natively(rt: Any, stream: Any) -> bool:
    """Return True if a scheme on ``rt`` drawing from ``stream`` runs in native code."""
    return (NativeStream is not None and isinstance(stream, NativeStream)
            and isinstance(rt, VirtualRuntime))


def simpledb_core(scheme: Any) -> Any:
    """Return the native core of a ``SimpleDB`` (see :func:`runs_natively`)."""
    from replicalab.runtime.virtual import _FOR_GOOD, _Timer
    from replicalab.sim.errors import ConditionNotMet, Lost
    from replicalab.sim.scheme import expectation_holds

    return SimpleDbCore(scheme, scheme.s, (Lost, ConditionNotMet), (_FOR_GOOD, _Timer),
                        expectation_holds)


def read_core(scheme: Any) -> Any:
    """Return the native reads of a ``Quorum`` or ``Primary`` whose nodes are SimNodes."""
    from replicalab.runtime.virtual import _FOR_GOOD, _Timer
    from replicalab.sim.errors import Lost

    return ReadCore(scheme, scheme.s, Lost, (_FOR_GOOD, _Timer))
