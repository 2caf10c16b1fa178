"""What reaches a person's terminal: text escaped so that nothing a participant wrote can drive it.

A participant names its scripts, writes their output and raises their exceptions, and all of it
comes back to a terminal in records, events, progress lines and error messages. Printed raw, an
escape sequence in any of them could retitle the window, clear the screen or draw a fake result
line, and a bidi override could reorder a line as it is shown. So every command writes through
``echo`` (plain lines) or a ``terminal_console()`` (rich), both of which apply ``terminal_safe``;
and participant text inside rich output goes in as ``plain(text)``, so that ``[red]`` or
``[link=...]`` in it is shown as written, not obeyed as markup. ``--json`` output is left to its
encoder (``json.dumps`` and msgspec write every C0 control, ESC included, as ``\\u00XX``).

Stdlib only at import (rich is imported when a console or a Text is asked for): ``roboswe.sandbox``
re-exports ``terminal_safe`` for the code that imported it from there.
"""

from __future__ import annotations

import functools
import sys
import unicodedata
from typing import Any, TextIO

# Cc: C0 controls, DEL, C1; Cf: format characters (the bidi overrides U+202A-202E and isolates
# U+2066-2069, zero-width characters); Cs: lone surrogates (a path decoded with surrogateescape),
# which would make print raise; Zl, Zp: line and paragraph separators.
_ESCAPED = ("Cc", "Cf", "Cs", "Zl", "Zp")


def terminal_safe(text: str, *, multiline: bool = True) -> str:
    """``text`` made safe to print: control and format characters shown as Python escapes (``\\x1b``, ``\\u202e``).

    Tab is kept, and newline while ``multiline`` (False for a field of a one-line layout: a log line,
    a progress line, a table row). Printable text comes back unchanged, and so does escaped text: it
    is idempotent. Never raises.
    """
    if text.isprintable():  # no character of an escaped category (isprintable is False for each)
        return text
    keep = "\n\t" if multiline else "\t"
    return "".join(c if c in keep or unicodedata.category(c) not in _ESCAPED
                   else c.encode("unicode_escape").decode("ascii") for c in text)


def did_you_mean(name: str, choices: Any) -> str:
    """``" (did you mean 'x'?)"`` for the closest of ``choices`` to a mistyped ``name``, or ``""`` when none is close."""
    import difflib

    close = difflib.get_close_matches(name, list(choices), n=2, cutoff=0.7)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""


def echo(text: str, *, file: TextIO | None = None, multiline: bool = True, flush: bool = False) -> None:
    """Print one message (``print``'s line, to stdout or ``file``) with ``terminal_safe``: how commands write text."""
    print(terminal_safe(text, multiline=multiline), file=file if file is not None else sys.stdout, flush=flush)


def plain(text: str, style: str = "", *, multiline: bool = True) -> Any:
    """Participant text for rich output: a ``rich.text.Text``, escaped (``terminal_safe``), that no markup in it can
    restyle or link."""
    from rich.text import Text

    return Text(terminal_safe(text, multiline=multiline), style=style)


def terminal_console(**options: Any) -> Any:
    """A ``rich.console.Console`` (``options`` as its own) that escapes every string it renders and every segment it writes.

    Strings are escaped before markup is read, so the layout is measured on what is shown; a Text
    built elsewhere is escaped segment by segment on its way out. Rich's own control sequences (the
    live display's cursor moves, styles) are not text and pass.
    """
    return _console_class()(**options)


@functools.cache
def _console_class() -> type:
    from rich.console import Console
    from rich.segment import Segment

    class TerminalConsole(Console):
        def render_str(self, text: str, **kwargs: Any) -> Any:
            return super().render_str(terminal_safe(text), **kwargs)

        def render(self, renderable: Any, options: Any = None) -> Any:
            for segment in super().render(renderable, options):
                if segment.control or segment.text.isprintable():
                    yield segment
                else:
                    yield Segment(terminal_safe(segment.text), segment.style)

    return TerminalConsole
