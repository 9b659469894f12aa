"""Outcomes the simulator reports; the sim store adapter maps them onto store errors."""


class Lost(Exception):
    """The request or its reply was lost (crash, partition): the outcome is unknown."""


class ConditionNotMet(Exception):
    """A conditional write found other current values at the deciding replica."""


class NotExpressible(Exception):
    """The scheme cannot do this in one call (e.g. a multi-element read across domains)."""


class ServiceUnavailable(Exception):
    """The service refused the call at once, over its capacity (SimpleDB's 503
    ServiceUnavailable, seed 000): it certainly did not happen."""
