"""Machines reached over SSH, as Jepsen's control layer reaches its nodes: an inventory
(TOML), one Host protocol with one implementation over the OpenSSH client, commands armed to
undo themselves on the host, and emulated hosts in network namespaces. Knows nothing of
stores."""
