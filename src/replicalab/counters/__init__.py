"""Bounded Counter CRDT (seed 004) and the middleware that enforces numeric invariants over
eventually consistent stores across data centres."""
