"""Hybrid logical clocks, HLC trace alignment and consistent-cut queries (seed 002)."""
