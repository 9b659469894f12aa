"""The nemesis: crash, pause, partition and slow nodes or regions on a schedule."""
