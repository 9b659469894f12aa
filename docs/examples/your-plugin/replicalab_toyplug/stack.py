"""The ``toy-stack`` checker model: a LIFO stack, ``replicalab check --model toy-stack``."""

from __future__ import annotations

from typing import Any

from replicalab.checkers.linearizability.model import Model
from replicalab.checkers.linearizability.ops import LinOp


class Stack(Model):
    """``push`` a value, ``pop`` the newest one (nil when empty)."""

    name = "toy-stack"
    summary = "a stack: push x, pop (returns the newest, nil when empty)"
    ops = ("push", "pop")

    def init(self) -> tuple[Any, ...]:
        return ()

    def step(self, state: tuple[Any, ...], op: LinOp) -> tuple[bool, tuple[Any, ...]]:
        if op.f == "push":
            return True, (*state, op.value)
        if op.outcome == "info":  # what it popped is unknown: the newest value, if any
            return True, state[:-1]
        if op.value is None:
            return not state, state
        return bool(state) and state[-1] == op.value, state[:-1]
