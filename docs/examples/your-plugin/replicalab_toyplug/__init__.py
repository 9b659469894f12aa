"""A replicalab plugin: the ``toykv`` store kind (a tiny TCP key-value server of its own,
its cluster driver and its adapter), the ``toy-linearizable`` scorecard property, the
``toy-mm1`` protocol model and the ``toy-stack`` checker model. ``pip install`` it and the
installed ``replicalab`` command has them all (docs/your-store.md)."""
