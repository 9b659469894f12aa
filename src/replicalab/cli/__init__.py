"""The ``replicalab`` command line: one module per verb, thin (parse, call, render)."""
