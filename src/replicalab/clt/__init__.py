"""Cloud Latency Tester: agents, coordinator, records and analysis (seed 002)."""
