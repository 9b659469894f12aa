"""What runs several workloads, stores and faults and grades them: the scorecard (seed 001's
chart measured: ``plan`` what runs, ``measure`` and ``durability`` run them, ``cells`` grades
them against ``promises``, ``run`` fills and saves a scorecard), ``compare`` and
model-against-store. A layer below ``cli/`` and ``report/``, above workloads, faults and
clusters."""
