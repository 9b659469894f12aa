"""Discrete-event twins of the analytic models."""
