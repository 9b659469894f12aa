"""The CLI's one output layer: literal text and tables that never cut a value short.

Every command prints through here:

* :func:`say` prints text literally: square brackets in a store URL, a cluster name, a hint
  such as ``pip install 'replicalab[ray]'`` are never read as Rich markup.
* :class:`TableData` is a table as plain data (caption, header, rows of strings). It goes
  into a command's ``--json`` unchanged (:meth:`TableData.to_json`) and is printed by
  :func:`show`, which never truncates a value:

  - not on a terminal (piped, redirected to a file): the table at its natural width, however
    wide, so ``compare > out.txt`` holds every value whole;
  - on a terminal wide enough: the same;
  - on a narrower terminal: label columns (and every header) wrap at word boundaries while
    value columns keep each value on one line;
  - on a terminal too narrow even for that: one block per row, ``header: value`` per line.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from replicalab.api.outcome import DONE, FAILED, INCONCLUSIVE, INTERRUPTED, Outcome, Table

T = TypeVar("T")

# Rich is imported on first use (a table, a width): a command that only prints lines,
# such as a short ``replicalab check``, does not pay for it at start-up.
_OUT: list[Any] = []


def stdout_console() -> Any:
    """Return the Rich console on standard output (markup off: text printed as given)."""
    if not _OUT:
        from rich.console import Console

        _OUT.append(Console(highlight=False, soft_wrap=True, markup=False, emoji=False))
    return _OUT[0]


def Text(text: str) -> Any:  # stands in for rich.text.Text, imported late
    """Return ``rich.text.Text(text)``."""
    from rich.text import Text as RichText

    return RichText(text)

_PADDING = 2  # Rich's default cell padding: one space each side


TableData = Table
"""The tables a command prints are the API's (``api/outcome.py``)."""


def say(text: str = "", *, err: bool = False) -> None:
    """Print ``text`` literally (no markup, no highlighting) on stdout, or stderr."""
    from replicalab.cli.errors import flush_notes

    flush_notes()  # deprecation notes come before the command's first output
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n")
    stream.flush()


def _longest_word(text: str) -> int:
    return max((Text(w).cell_len for w in text.split()), default=0)


def _cell_len(text: str) -> int:
    return max((Text(line).cell_len for line in text.splitlines()), default=0)


def column_widths(t: TableData) -> tuple[list[int], list[int]]:
    """Return (natural, least) content widths per column, in terminal cells: natural holds
    every cell on one line; least lets headers and label columns wrap at spaces but keeps
    every value cell whole."""
    natural, least = [], []
    for i, h in enumerate(t.header):
        cells = [r[i] for r in t.rows]
        natural.append(max([_cell_len(h), *(_cell_len(c) for c in cells)], default=1) or 1)
        body = [(_longest_word(c) if i in t.wrap else _cell_len(c)) for c in cells]
        least.append(max([_longest_word(h), *body], default=1) or 1)
    return natural, least


def _frame(n_columns: int) -> int:
    """Return the cells a Rich table with the default box spends outside its content."""
    return n_columns * _PADDING + n_columns + 1


def natural_width(t: TableData) -> int:
    """Return the width (cells) of ``t`` printed with every cell on one line."""
    return sum(column_widths(t)[0]) + _frame(len(t.header))


def fit_widths(t: TableData, width: int) -> list[int] | None:
    """Return content widths that fit ``t`` in ``width`` cells without breaking a value, or
    None if even the least widths do not fit (then :func:`show` prints records)."""
    natural, least = column_widths(t)
    room = width - _frame(len(t.header))
    if sum(natural) <= room:
        return natural
    if sum(least) > room:
        return None
    spare = room - sum(least)
    want = [n - m for n, m in zip(natural, least, strict=True)]
    total = sum(want) or 1
    widths = [m + spare * w // total for m, w in zip(least, want, strict=True)]
    for i in sorted(range(len(widths)), key=lambda i: want[i] - (widths[i] - least[i]),
                    reverse=True):  # hand out what integer division left over
        if sum(widths) >= room:
            break
        if widths[i] < natural[i]:
            widths[i] += 1
    return widths


def _rich_table(t: TableData, widths: Sequence[int] | None, title: bool = True) -> Any:
    from rich.table import Table

    table = Table(title=Text(t.caption) if t.caption and title else None,
                  title_justify="left")
    for i, h in enumerate(t.header):
        table.add_column(Text(h), justify="right" if i in t.right else "left",
                         width=None if widths is None else widths[i], overflow="fold")
    for r in t.rows:
        table.add_row(*(Text(c) for c in r))
    return table


def render_records(t: TableData, width: int | None = None) -> str:
    """Return ``t`` as one block per row, ``header: value`` per line (the layout for
    terminals too narrow for it); within ``width`` a long header wraps at spaces and its
    value goes on the next line, whole."""
    import textwrap  # compiles its patterns on import: loaded for narrow terminals only

    lines = textwrap.wrap(t.caption, width) if t.caption and width else (
        [t.caption] if t.caption else [])

    def pair(i: int, value: str, indent: str) -> None:
        line = f"{indent}{t.header[i]}: {value}"
        if width is None or len(line) <= width:
            lines.append(line)
            return
        room = max(width - len(indent) - 4, 10)
        lines.extend(textwrap.wrap(f"{t.header[i]}:", room + 4, initial_indent=indent,
                                   subsequent_indent=indent))
        # a label may wrap at spaces like any text; a value stays whole on its line
        parts = textwrap.wrap(value, room) if i in t.wrap and value.strip() else [value]
        lines.extend(f"{indent}    {p}" for p in parts)

    for r in t.rows:
        pair(0, r[0], "")
        for i in range(1, len(t.header)):
            pair(i, r[i], "  ")
    return "\n".join(lines)


def render(t: TableData, width: int | None) -> str:
    """Return ``t`` as text for a terminal of ``width`` cells (None: not a terminal, so at
    its natural width, its prose values under it)."""
    if width is None:
        t, below = t.prose_apart()
        if below:
            return "\n".join([render(t, None), *below])
    widths = fit_widths(t, width) if width is not None else None
    if width is not None and widths is None:
        return render_records(t, width)
    full = natural_width(t) if width is None else width
    # a caption wider than the table goes on a line of its own: Rich would wrap it at the
    # table's width, cutting a phrase someone may grep for
    apart = width is None and Text(t.caption).cell_len > natural_width(t)
    buf = io.StringIO()
    from rich.console import Console

    console = Console(file=buf, width=max(full, 20), highlight=False, markup=False,
                      emoji=False, soft_wrap=False, color_system=None)
    console.print(_rich_table(t, widths, title=not apart))
    lines = [line.rstrip() for line in buf.getvalue().rstrip("\n").splitlines()]
    return "\n".join([t.caption, *lines] if apart else lines)


def show(tables: TableData | Iterable[TableData]) -> None:
    """Print one table or several on stdout (see the module docstring for the layout)."""
    from replicalab.cli.errors import flush_notes

    flush_notes()
    for t in [tables] if isinstance(tables, TableData) else tables:
        if not stdout_console().is_terminal:
            sys.stdout.write(render(t, None) + "\n")
            continue
        widths = fit_widths(t, stdout_console().width)
        if widths is None:
            say(render_records(t, stdout_console().width))
        else:
            stdout_console().print(_rich_table(t, widths))
    sys.stdout.flush()


def emit(outcome: Outcome, as_json: bool, sort_keys: bool = True) -> None:
    """Print a verb's outcome: one JSON object (``--json``), or its tables, its remarks and
    where its run directory and report are; then exit as it ended (130 interrupted, 1 its
    own verdict failed, 3 inconclusive, 2 stopped early), with its one line."""
    import json

    if as_json:
        sys.stdout.write(json.dumps(outcome.to_json(), sort_keys=sort_keys, default=str)
                         + "\n")
        sys.stdout.flush()
    else:
        show(outcome.tables)
        for line in outcome.remarks:
            say(line)
        if outcome.report is not None:
            say(f"report: {outcome.report}")
    if outcome.status != DONE:
        from replicalab.cli.errors import fail

        code = {INTERRUPTED: 130, FAILED: 1, INCONCLUSIVE: 3}.get(outcome.status, 2)
        if not outcome.why:  # the verdict printed says it all
            sys.exit(code)
        fail(outcome.why, code)


def attempt(make: Callable[[], T], flags: dict[str, str] | None = None) -> T:
    """Return what ``make()`` returns; bad input (a ValueError, the API's ParameterError
    with its options for ``flags``) is one line and exit 2, and a deprecated value a note."""
    from replicalab.cli.errors import fail, said
    from replicalab.cli.timeparse import warnings_as_notes

    try:
        with warnings_as_notes():
            return make()
    except ValueError as err:
        fail(said(err, flags))


def outcome_of(make: Callable[[], Outcome], as_json: bool, flags: dict[str, str] | None = None,
               sort_keys: bool = True) -> None:
    """Print the outcome ``make()`` returns (:func:`emit`), its bad input one line and exit 2
    (:func:`attempt`)."""
    emit(attempt(make, flags), as_json, sort_keys)
