"""Bad input to an API function, said in the API's words: the parameter's Python name, what
is wrong with its value, and the fix. A front end (the command line) says the same with its
own name for the parameter (``--model`` for ``model``): :meth:`ParameterError.said_as`."""

from __future__ import annotations


class ParameterError(ValueError):
    """Bad input naming the parameter: ``str(err)`` reads ``"<parameter> <problem>"``, e.g.
    ``model 'sets': use one of kv, cas-register, ...``."""

    def __init__(self, parameter: str, problem: str) -> None:
        self.parameter, self.problem = parameter, problem
        super().__init__(f"{parameter} {problem}")

    def said_as(self, name: str) -> str:
        """Return the message with ``name`` in place of the parameter's name."""
        return f"{name} {self.problem}"


class ParameterDeprecation(FutureWarning):
    """A value the API still takes but will not: ``str(w)`` reads ``"<parameter>
    <note>"`` (a bare number read as seconds); a front end names the parameter its way
    (:meth:`said_as`)."""

    def __init__(self, parameter: str, note: str) -> None:
        self.parameter, self.note = parameter, note
        super().__init__(f"{parameter} {note}")

    def said_as(self, name: str) -> str:
        """Return the note with ``name`` in place of the parameter's name."""
        return f"{name} {self.note}"
