"""replicalab: measure, model and enforce consistency of replicated data stores."""

__version__ = "0.1.0"
