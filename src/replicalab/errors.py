"""Bad input, said in the API's words: the parameter's Python name, what is wrong with its
value, and the fix. Raised wherever the bad value is found (a workload's config, the fault
schedule, the run directory), never naming a command-line option: Python callers read
``duration '1 hour' ...``, the command line ``--duration '1 hour' ...``: a front end says
the same with its own names for the parameters (:meth:`ParameterError.said_as`).

A message may name other parameters in its fix: ``{force}`` in the text is written
``force=True`` by the API (``mentions`` says how) and ``--force`` by the command line.

Malformed input found below the API (a history a model cannot take) is an
:class:`InputError`: its fix may name a parameter the same way (``use {model} kv``), and the
API says it again as a ParameterError naming that parameter (:meth:`InputError.naming`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping


def _fill(text: str, names: Callable[[str], str], mentions: Mapping[str, str]) -> str:
    for name in mentions:
        text = text.replace("{" + name + "}", names(name))
    return text


class ParameterError(ValueError):
    """Bad input naming the parameter: ``str(err)`` reads ``"<parameter> <problem>"``, e.g.
    ``model 'sets': use one of kv, cas-register, ...``; ``mentions`` maps each other
    parameter the problem names (``{name}`` in its text) to how Python writes it."""

    def __init__(self, parameter: str, problem: str,
                 mentions: Mapping[str, str] | None = None) -> None:
        self.parameter, self.problem = parameter, problem
        self.mentions = dict(mentions or {})
        super().__init__(f"{parameter} {_fill(problem, self.mentions.__getitem__, self.mentions)}")

    def __reduce__(self) -> tuple[type, tuple[str, str, dict[str, str]]]:
        # Crosses process boundaries whole (a worker process's bad input): rebuilt from its
        # parts, so the command line can still say it with its options.
        return type(self), (self.parameter, self.problem, self.mentions)

    def said_as(self, name: str, names: Callable[[str], str] | None = None) -> str:
        """Return the message with ``name`` for the parameter and ``names(p)`` for each
        parameter it mentions (default: as Python writes them)."""
        return f"{name} {_fill(self.problem, names or self.mentions.__getitem__, self.mentions)}"


MODEL = {"model": "model"}
"""The mention of the ``model`` parameter (``{model}`` in a problem's text), as the checkers
name the model that would take a history."""


class InputError(ValueError):
    """Malformed input whose fix may name a parameter (``{model}`` in ``problem``, written
    as ``mentions`` says by ``str(err)``, the Python way): ``str(err)`` reads ``problem``,
    e.g. ``op 3: a cas of [1 2] (use model cas-register or kv)``."""

    def __init__(self, problem: str, mentions: Mapping[str, str] | None = None) -> None:
        self.problem = problem
        self.mentions = dict(mentions or {})
        super().__init__(_fill(problem, self.mentions.__getitem__, self.mentions))

    def names(self, parameter: str) -> bool:
        """Return whether the fix names ``parameter`` (``{parameter}`` in the problem)."""
        return parameter in self.mentions and "{" + parameter + "}" in self.problem

    def naming(self, parameter: str, before: str = "") -> ParameterError:
        """Return this error as a ParameterError naming ``parameter``: ``before`` (what
        was wrong with the parameter's value) followed by the problem, its mentions
        kept for a front end to name its way."""
        return ParameterError(parameter, before + self.problem, self.mentions)


class ParameterDeprecation(FutureWarning):
    """A value the API still takes but will not: ``str(w)`` reads ``"<parameter>
    <note>"`` (a bare number read as seconds); a front end names the parameter its way
    (:meth:`said_as`)."""

    def __init__(self, parameter: str, note: str) -> None:
        self.parameter, self.note = parameter, note
        super().__init__(f"{parameter} {note}")

    def said_as(self, name: str, names: Callable[[str], str] | None = None) -> str:
        """Return the note with ``name`` in place of the parameter's name."""
        return f"{name} {self.note}"
