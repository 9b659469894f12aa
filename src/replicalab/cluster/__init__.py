"""Real local clusters (redis, postgres, etcd, zookeeper) with WAN links through Toxiproxy."""
