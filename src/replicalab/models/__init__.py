"""Analytic performance models of replication protocols, each with a discrete-event twin.

Every model module offers ``curve(params, loads_rps) -> Curve`` (analytic) and its twin in
``models/twins/`` offers ``simulate(params, loads_rps, seed, rounds) -> Curve`` (message-level
simulation on the ``sim/`` network kernel). Times are ms, rates per second.
"""
