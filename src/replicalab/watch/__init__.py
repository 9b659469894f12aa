"""Continuous latency monitoring of object stores (seed 001): the watcher, its backends
file, the sample database, statistics, and the store-driven toy vehicle."""
