"""Data placement (seed 002): migration policies fed one access at a time, the load-balancing
filter, and their seeded simulator over a region matrix (``aws15``).

Modules: ``matrix`` (region matrices), ``policies`` (the reference policies and the filter,
the contract live migration drives), ``workloads`` (the seed's request streams), ``kernel``
(the fast path, equal to the policies; its numba loop is in ``jit``), ``metrics`` (latency,
migrations, balance over time) and ``simulate`` (runs and experiments).
"""
