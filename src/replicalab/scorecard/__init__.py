"""Seed 001's chart measured: per store, cells of latency, durability, availability,
consistency, transactionality and geography, each composed from runs of existing workloads
and faults (``plan`` what runs, ``measure`` and ``durability`` run them, ``cells`` grades
them against ``promises``, ``run`` fills and saves a scorecard)."""
