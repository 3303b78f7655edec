"""`planner --help` (and bare `planner`, which prints the same help) without importing typer or rich: the group's
help page drawn in plain Python from planner/helptext.py, a file generated from the typer app itself (the usage line,
the description, the options and every command with its one-line summary, plus the few typer settings the page's
look depends on: its highlighter's patterns and its theme). `python -m planner.fasthelp --write` regenerates it;
tests/test_fastpath.py fails when it differs from what the app would generate (a command added, a summary edited,
typer's styles changed) and compares the page drawn here with typer's, byte for byte, at several widths and colour
settings.

typer draws this page with rich (typer.rich_utils: two rounded panels, each a borderless table, wrapped text and
ANSI styles); importing that renderer costs about twice the whole light floor (`import typer, rich`), so the page
is laid out here by the same rules for the one shape it has: a panel's top line with its title, each table's column
widths (the options table's fixed columns and its help column shrunk to fit; the commands table's name column of
the longest name and its description column taking the rest), rich's word wrapping (a break before a word that does
not fit, a line's trailing space kept), and its styles as SGR codes, one escape sequence per styled run of text as
rich writes them. Whatever this module does not reproduce exactly takes typer's path instead (`render` raises
Unsupported): a width under which a word would have to be cut, an environment setting it does not model (TTY_COMPATIBLE,
GITHUB_ACTIONS, PY_COLORS, TYPER_USE_RICH, _TYPER_FORCE_DISABLE_TERMINAL, a COLUMNS or TERMINAL_WIDTH that is not a
number), a non-UTF-8 stdout (rich would draw ASCII boxes), Windows.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

Style = tuple[bool, bool, str | None]
"""(bold, dim, colour name or None): the only attributes typer's help uses."""
Line = list[tuple[str, Style | None]]

_COLOUR_CODES = {"black": "30", "red": "31", "green": "32", "yellow": "33", "blue": "34", "magenta": "35",
                 "cyan": "36", "white": "37"}
"""SGR foreground codes of the eight standard colours (ECMA-48), which rich writes the same in every colour system."""

MIN_WIDTH = 40
"""Narrower terminals take typer's path (rich then folds words and shrinks columns by rules not modelled here)."""

HELPTEXT = Path(__file__).resolve().parent / "helptext.py"


class Unsupported(Exception):
    """Something this renderer does not reproduce exactly: take typer's path."""


def parse_style(text: str) -> Style:
    """A rich style string of typer's theme ('bold cyan', 'dim', 'yellow', '') as (bold, dim, colour)."""
    bold = dim = False
    colour = None
    for word in text.split():
        if word == "bold":
            bold = True
        elif word == "dim":
            dim = True
        elif word in _COLOUR_CODES:
            colour = word
        else:
            raise Unsupported(word)
    return bold, dim, colour


def _add(base: Style | None, top: Style | None) -> Style | None:
    """rich's `base + top`: attributes accumulate, the top colour wins."""
    if base is None:
        return top
    if top is None:
        return base
    return base[0] or top[0], base[1] or top[1], top[2] or base[2]


def sgr(style: Style | None, no_color: bool) -> str:
    """The SGR parameters rich writes for a style: attributes first (bold 1, dim 2), then the colour."""
    if style is None:
        return ""
    codes = (["1"] if style[0] else []) + (["2"] if style[1] else [])
    if style[2] is not None and not no_color:
        codes.append(_COLOUR_CODES[style[2]])
    return ";".join(codes)


# --- text: highlighting, wrapping and styled runs ---------------------------------------------------------------------

Span = tuple[int, int, Style | None]


def highlight(text: str, patterns: Sequence[str], theme: Mapping[str, str]) -> list[Span]:
    """typer's highlighter on `text`: for each pattern in order, each match's named groups (non-empty) as spans,
    styled by the theme (a name the theme lacks: no style)."""
    spans: list[Span] = []
    for pattern in patterns:
        for match in re.finditer(pattern, text):
            for name in match.groupdict():
                start, end = match.span(name)
                if start != -1 and end > start:
                    spans.append((start, end, parse_style(theme[name]) if name in theme else None))
    return spans


_WORD = re.compile(r"\s*\S+\s*")


def wrap(text: str, width: int, fold: bool = False) -> list[tuple[int, int]]:
    """rich's word wrap of one line of text at `width` cells, as (start, end) of each line: a line breaks before the
    word that does not fit, keeps its trailing white space unless that runs past `width`. A word longer than `width`
    (rich would cut it) or a character that is not one cell wide: Unsupported."""
    if any(not (" " <= c <= "~" or "\xa0" <= c <= "\u02ff" or "\u2010" <= c <= "\u2027" or c == "\u221e")
           for c in text):
        raise Unsupported("a character whose width rich measures differently")
    breaks: list[int] = []
    offset = 0
    for match in _WORD.finditer(text):
        start, word = match.start(), match.group(0)
        length = len(word.rstrip())
        if width - offset >= length:
            offset += len(word)
        elif length > width:
            if not fold:
                raise Unsupported("a word wider than its column")
            chunks = [word[i:i + width] for i in range(0, len(word), width)]  # rich cuts it into column-wide pieces
            for last, chunk in enumerate(chunks, 1 - len(chunks)):
                if start:
                    breaks.append(start)
                if last == 0:
                    offset = len(chunk)
                else:
                    start += len(chunk)
        elif offset and start:
            breaks.append(start)
            offset = len(word)
    lines = []
    for start, end in zip([0, *breaks], [*breaks, len(text)], strict=True):
        excess = (end - start) - width
        if excess > 0:  # trailing white space past the width is dropped
            end -= min(excess, len(text[start:end]) - len(text[start:end].rstrip()))
        lines.append((start, end))
    return lines


def runs(text: str, spans: Sequence[Span], start: int, end: int, pad: int = 0,
         outer: Style | None = None) -> Line:
    """The styled runs rich renders for text[start:end] followed by `pad` spaces in the text's own (empty) style: a
    new run at every span boundary, each run's style the spans over it combined in their order, under `outer`."""
    text = text[start:end] + " " * pad
    inside = [(max(s, start) - start, min(e, end) - start, st) for s, e, st in spans if s < end and e > start]
    events = [(0, False, -1), *((s, False, k) for k, (s, _, _) in enumerate(inside)),
              *((e, True, k) for k, (_, e, _) in enumerate(inside)), (len(text), True, -1)]
    events.sort(key=lambda ev: (ev[0], ev[1]))
    active: list[int] = []
    out: Line = []
    for (offset, leaving, k), (following, _, _) in zip(events, events[1:]):
        if leaving:
            active.remove(k)
        else:
            active.append(k)
        if following > offset:
            style = outer
            for index in sorted(i for i in active if i >= 0):
                style = _add(style, inside[index][2])
            out.append((text[offset:following], style))
    return out


# --- the page ---------------------------------------------------------------------------------------------------------

def _panel(title: str, rows: list[Line], width: int, border: Style) -> list[Line]:
    """rich's Panel with a rounded box, its title on the left of the top line, one space of padding each side."""
    label = f" {title} "
    if width - 4 < len(label) + 1:
        raise Unsupported("a title wider than its panel")
    top: Line = [("╭─", border), (label, border), ("─" * (width - 4 - len(label)), border), ("─╮", border)]
    body = [[("│", border), (" ", None), *row, (" ", None), ("│", border)] for row in rows]
    return [top, *body, [("╰" + "─" * (width - 2) + "╯", border)]]


def render(width: int, data: Any) -> list[Line]:
    """typer's help page for the group as lines of styled runs, `width` cells wide (rich's console width)."""
    if width < MIN_WIDTH:
        raise Unsupported("narrow")
    theme = data.THEME
    patterns = data.HIGHLIGHTS
    lines: list[Line] = []
    # Usage: Padding 1 on every side, everything bold (typer's usage style)
    bold = parse_style(data.USAGE_STYLE)
    usage = data.USAGE
    spans = highlight(usage, patterns, theme)
    lines.append([(" " * width, bold)])
    for start, end in wrap(usage, width - 2):
        rest = width - 2 - (end - start)
        lines.append([(" ", bold), *runs(usage, spans, start, end, outer=bold),
                      *([(" " * rest, bold)] if rest > 0 else []), (" ", bold)])
    lines.append([(" " * width, bold)])
    # The description: padding 0 above, 1 on the sides and below, no style of its own
    text = data.DESCRIPTION
    if text:
        spans = highlight(text, patterns, theme)
        for start, end in wrap(text, width - 2):
            rest = width - 2 - (end - start)
            lines.append([(" ", None), *runs(text, spans, start, end), *([(" " * rest, None)] if rest > 0 else []),
                          (" ", None)])
        lines.append([(" " * width, None)])
    inner = width - 4  # the tables' width inside a panel's borders and padding
    # Options: a borderless table of six columns (long names, short names, their negative forms, type, help); the
    # four middle ones are empty here (two cells of padding each); the help column takes what the first leaves
    first = max(len(name) for name, _ in data.OPTIONS) + 1
    help_width = inner - first - 8 - 1
    if inner - 10 < first + 8 or help_width < 1:
        raise Unsupported("options table too narrow")
    rows: list[Line] = []
    for name, text in data.OPTIONS:
        name_spans = highlight(name, patterns, theme)
        text_spans = highlight(text, patterns, theme)
        wrapped = wrap(text, help_width) if text else [(0, 0)]
        column = min(max(end - start for start, end in wrapped), help_width)  # rich.columns: the text's own width
        for k, (start, end) in enumerate(wrapped):
            head: Line = [*runs(name, name_spans, 0, len(name), pad=first - 1 - len(name)), (" ", None)] if k == 0 \
                else [(" " * first, None)]
            rows.append([*head, (" " * 9, None), *runs(text, text_spans, start, end, pad=column - (end - start)),
                         *([(" " * (help_width - column), None)] if help_width > column else [])])
    border = parse_style(data.OPTIONS_BORDER)
    lines += _panel(data.OPTIONS_TITLE, rows, width, border)
    # Commands: the name column as wide as the longest name (plus its padding), the description the rest
    names = parse_style(data.COMMAND_STYLE)
    first = max(len(name) for name, _ in data.COMMANDS) + 1
    text_width = inner - first - 1
    if text_width < 1:
        raise Unsupported("commands table too narrow")
    rows = []
    for name, text in data.COMMANDS:
        text_spans = highlight(text, patterns, theme)
        for k, (start, end) in enumerate(wrap(text, text_width) if text else [(0, 0)]):
            lead: Line = [(name.ljust(first - 1), names), (" ", names)] if k == 0 else [(" " * first, names)]
            rows.append([*lead, (" ", None), *runs(text, text_spans, start, end, pad=text_width - (end - start))])
    lines += _panel(data.COMMANDS_TITLE, rows, width, parse_style(data.COMMANDS_BORDER))
    return lines


def to_text(lines: list[Line], color: bool, no_color: bool) -> str:
    """The lines as rich writes them: each styled run `ESC[<codes>m text ESC[0m` when colour is on, else plain."""
    out = []
    for line in lines:
        for text, style in line:
            codes = sgr(style, no_color) if color else ""
            out.append(f"\x1b[{codes}m{text}\x1b[0m" if codes and text else text)
        out.append("\n")
    return "".join(out)


# --- the console typer would open -------------------------------------------------------------------------------------

_NOT_MODELLED = ("TYPER_USE_RICH", "GITHUB_ACTIONS", "PY_COLORS", "_TYPER_FORCE_DISABLE_TERMINAL", "TTY_COMPATIBLE")


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def console(env: Mapping[str, str], stream: TextIO, piped_width: int) -> tuple[int, bool, bool]:
    """(width, colour on, NO_COLOR) of the rich console typer prints its help on, for this environment and stdout:
    typer forces a terminal when FORCE_COLOR is set and takes its width from TERMINAL_WIDTH; planner.cli.app widens
    piped help to `piped_width` unless COLUMNS or TERMINAL_WIDTH is set; rich reads COLUMNS, LINES, TERM, NO_COLOR and
    the terminal's size (stdin, stdout, stderr in turn; 80 when none is a terminal or a dumb terminal)."""
    if os.name == "nt" or any(key in env for key in _NOT_MODELLED):
        raise Unsupported("environment")
    if not (getattr(stream, "encoding", None) or "utf-8").lower().startswith("utf"):
        raise Unsupported("encoding")
    force = env.get("FORCE_COLOR")
    terminal = bool(force) if force is not None else _isatty(stream)
    dumb = terminal and env.get("TERM", "").lower() in ("dumb", "unknown")
    width: int | None = None
    terminal_width = env.get("TERMINAL_WIDTH")
    if terminal_width:
        if not terminal_width.isdigit():
            raise Unsupported("TERMINAL_WIDTH")
        width = int(terminal_width)
    elif terminal_width is None and "COLUMNS" not in env and not _isatty(stream):
        width = piped_width
    return settled_width(env, width, dumb), terminal and not dumb, env.get("NO_COLOR", "") != ""


def settled_width(env: Mapping[str, str], width: int | None, dumb: bool) -> int:
    """The width rich's Console settles on from a width already chosen (or None): COLUMNS when none was, 80 on a dumb
    terminal unless LINES is set too, else the first of stdin, stdout and stderr that is a terminal, else 80."""
    columns = env.get("COLUMNS")
    if width is None and columns is not None:
        if not columns.isdigit():
            raise Unsupported("COLUMNS")
        width = int(columns)
    lines = env.get("LINES")
    if width is not None and lines is not None and lines.isdigit():
        pass
    elif dumb:
        width = 80
    elif width is None:
        for fd in (0, 1, 2):
            try:
                width = os.get_terminal_size(fd).columns
                break
            except (AttributeError, ValueError, OSError):
                continue
        width = width or 80
    return 80 if width is None else width


def installed_version(name: str) -> str | None:
    """The version of an installed distribution read from its `NAME-VERSION.dist-info` folder beside the package,
    without importing it or importlib.metadata (about 30 ms); None where that layout is not found."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.origin:
        return None
    prefix = f"{name}-"
    try:
        entries = os.listdir(Path(spec.origin).parent.parent)
    except OSError:
        return None
    found = [entry[len(prefix):-len(".dist-info")] for entry in entries
             if entry.startswith(prefix) and entry.endswith(".dist-info")]
    return found[0] if len(found) == 1 else None


def same_libraries(names: Sequence[str] = ("typer", "rich")) -> None:
    """Unsupported unless the installed typer and rich are the releases planner/helptext.py was generated with: another
    release may draw its help or tables otherwise, and then typer and rich draw them."""
    from planner import helptext

    for name in names:
        if installed_version(name) != helptext.LIBRARY_VERSIONS[name]:
            raise Unsupported(f"{name} release")


def page(env: Mapping[str, str] | None = None, stream: TextIO | None = None) -> str:
    """The help page typer would print on `stream` (stdout) in this environment (os.environ); Unsupported when it
    would differ from typer's. Without the trailing empty line that `--help` adds."""
    from planner import helptext

    same_libraries()
    width, color, no_color = console(os.environ if env is None else env, sys.stdout if stream is None else stream,
                                     helptext.PIPED_WIDTH)
    return to_text(render(width, helptext), color, no_color)


# --- generating planner/helptext.py from the app ----------------------------------------------------------------------

def help_content() -> dict[str, Any]:
    """What typer's help for the `planner` group reads, taken from the app (imports typer and every command), checked
    to be of the shape `render` draws (one paragraph of description, options with only a long name and help, no
    argument, no extra panel, no deprecated command, no epilog)."""
    import inspect

    import typer
    from typer import rich_utils
    from typer.core import TyperOption

    from planner.cli import app
    from planner.cli.app import HELP_WIDTH_PIPED, _switches_as_switches

    group: Any = typer.main.get_command(app)
    _switches_as_switches(group)
    ctx = group.context_class(group, info_name="planner")
    problems = []
    if getattr(group, "rich_markup_mode", None) != "rich" or group.epilog or group.deprecated:
        problems.append("markup mode, epilog or deprecation")
    paragraphs = inspect.cleandoc(group.help or "").partition("\f")[0].split("\n\n")
    if len(paragraphs) > 1 or paragraphs[0].startswith("\b"):
        problems.append("a description of more than one paragraph")
    description = paragraphs[0].replace("\n", " ").strip()
    options = []
    param: Any
    for param in group.get_params(ctx):
        if getattr(param, "hidden", False):
            continue
        long = [o for o in param.opts if "--" in o]
        if (not isinstance(param, TyperOption) or getattr(param, "rich_help_panel", None) or param.secondary_opts
                or len(long) != len(param.opts) or param.display_type_rich(ctx=ctx) or param.required
                or param._get_number_range_help_str()):
            problems.append(f"option {param.opts}")
        help_items = rich_utils._get_parameter_help(param=param, ctx=ctx, markup_mode="rich").renderables
        text = inspect.cleandoc(param.help or "").replace("\n", " ").strip()
        if len(help_items) != (1 if text else 0) or "\n\n" in (param.help or ""):
            problems.append(f"option {param.opts}: a default, an environment variable or paragraphs in its help")
        options.append((",".join(long), text))
    commands = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        if command.deprecated or getattr(command, "rich_help_panel", None):
            problems.append(f"command {name}: deprecated or in its own panel")
        text = inspect.cleandoc(command.short_help or command.help or "").split("\n\n")[0]
        if "\n" in text or text.startswith("\b"):
            problems.append(f"command {name}: a summary of more than one line")
        commands.append((command.name or "", text.strip()))
    usage = group.get_usage(ctx)
    if "\x1b" in usage or "\n" in usage:  # typer highlights the usage line as plain text (no markup)
        problems.append(f"an escape sequence or a line break in {usage!r}")
    for text in [description, *(t for _, t in options), *(t for _, t in commands)]:
        if "[" in text or "\x1b" in text or re.search(r":\S+:", text) or "\n" in text:
            problems.append(f"markup, an emoji code, an escape sequence or a line break in {text!r}")
    if problems:
        raise Unsupported("; ".join(problems))
    theme_keys = ("option", "switch", "negative_option", "negative_switch", "types", "types_sep", "usage")
    theme = dict(zip(theme_keys, (rich_utils.STYLE_OPTION, rich_utils.STYLE_SWITCH, rich_utils.STYLE_NEGATIVE_OPTION,
                                  rich_utils.STYLE_NEGATIVE_SWITCH, rich_utils.STYLE_TYPES,
                                  rich_utils.STYLE_TYPES_SEPARATOR, rich_utils.STYLE_USAGE), strict=True))
    return {
        "USAGE": usage, "USAGE_STYLE": rich_utils.STYLE_USAGE_COMMAND, "DESCRIPTION": description,
        "OPTIONS_TITLE": rich_utils.OPTIONS_PANEL_TITLE, "OPTIONS_BORDER": rich_utils.STYLE_OPTIONS_PANEL_BORDER,
        "OPTIONS": tuple(options),
        "COMMANDS_TITLE": rich_utils.COMMANDS_PANEL_TITLE, "COMMANDS_BORDER": rich_utils.STYLE_COMMANDS_PANEL_BORDER,
        "COMMAND_STYLE": rich_utils.STYLE_COMMANDS_TABLE_FIRST_COLUMN, "COMMANDS": tuple(commands),
        "HIGHLIGHTS": tuple(rich_utils.OptionHighlighter.highlights), "THEME": theme,
        "PIPED_WIDTH": HELP_WIDTH_PIPED,
        "LIBRARY_VERSIONS": {"typer": typer.__version__, "rich": _metadata_version("rich")},
    }


def _literal(text: str, indent: int) -> list[str]:
    """`text` as Python string literals, one per line, each line within 120 columns (adjacent literals join)."""
    pieces, current = [], ""
    for word in re.findall(r"\S+\s*|\s+", text) or [""]:
        if current and indent + len(repr(current + word)) > 119:
            pieces.append(current)
            current = ""
        current += word
    pieces.append(current)
    return [" " * indent + repr(piece) for piece in pieces]


def _metadata_version(name: str) -> str:
    import importlib.metadata

    return importlib.metadata.version(name)


def generated_source() -> str:
    """planner/helptext.py as the app generates it now."""
    content = help_content()
    out = ['"""Generated by `python -m planner.fasthelp --write` from the typer app (planner.cli): what `planner',
           "--help` prints, for planner/fasthelp.py to draw without typer. Do not edit: tests/test_fastpath.py fails",
           'when it differs from what the app generates."""', ""]
    for key, value in content.items():
        if isinstance(value, str) and len(f"{key} = {value!r}") > 119:
            out += [f"{key} = (", *_literal(value, 4), ")"]
        elif isinstance(value, tuple):
            out.append(f"{key} = (")
            for item in value:
                if isinstance(item, tuple):
                    out.append("    (")
                    for part in item:
                        lines = _literal(part, 8)
                        out += [*lines[:-1], lines[-1] + ","]
                    out.append("    ),")
                else:
                    lines = _literal(item, 4)
                    out += [*lines[:-1], lines[-1] + ","]
            out.append(")")
        elif isinstance(value, dict):
            out.append(f"{key} = {{")
            out += [f"    {k!r}: {v!r}," for k, v in value.items()]
            out.append("}")
        else:
            out.append(f"{key} = {value!r}")
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m planner.fasthelp [--write]`: check (exit 1 when stale) or rewrite planner/helptext.py."""
    args = list(sys.argv[1:] if argv is None else argv)
    text = generated_source()
    if args == ["--write"]:
        HELPTEXT.write_text(text, encoding="utf-8")
        return 0
    if args:
        sys.stderr.write("usage: python -m planner.fasthelp [--write]\n")
        return 2
    current = HELPTEXT.read_text(encoding="utf-8") if HELPTEXT.is_file() else ""
    if current != text:
        sys.stderr.write("error: planner/helptext.py is stale; run `python -m planner.fasthelp --write`\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
