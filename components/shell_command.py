"""A server's ``command``: one POSIX simple command, read the way ``sh`` reads it.

run.sh ``exec``s the command so that the server, not a shell, is the process the Web Adapter
starts and signals. ``exec`` must then stand where the command's program starts: after the
variable assignments and redirections before it (``FASTMCP_PORT=$PORT python3 server.py``
becomes ``FASTMCP_PORT=$PORT exec python3 server.py``; ``exec FASTMCP_PORT=...`` would look
for a program of that name). Finding that place needs the shell's own word rules (POSIX
Shell Command Language, 2.3 Token Recognition and 2.9.1 Simple Commands): quotes, backslash
escapes, ``$(...)``, ``${...}`` and backquotes hold blanks that do not split words.

What is not one simple command is refused with what is wrong: an unclosed quote or
substitution, an operator that makes a list, a pipeline or a background job (``;``, ``&``,
``|``, ``(``, ``)``), a compound command (``if``, ``{``...), or no program at all.
Everything a shell accepts as a simple command is kept as written: expansions (``$PORT``)
happen when run.sh runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Words that start a compound command or negate a pipeline where a program would stand.
RESERVED_WORDS = frozenset({"!", "{", "}", "case", "do", "done", "elif", "else", "esac", "fi", "for", "if", "in",
                            "then", "until", "while", "function", "select", "[[", "]]"})
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_BLANKS = " \t"
_OPERATORS = ";&|()"
_REDIRECTIONS = "<>"


class CommandError(ValueError):
    """The command is not one POSIX simple command; the message says what is wrong."""


@dataclass(frozen=True)
class Token:
    text: str  # as written
    start: int  # where it starts in the command
    redirection: bool = False  # an operator like >, 2>&1's >&, with its target word


@dataclass(frozen=True)
class SimpleCommand:
    command: str
    prefix: str  # the assignments and redirections before the program, as written
    program: str  # the program word as written (quotes and all)
    rest: str  # from the program on, as written

    @property
    def exec_line(self) -> str:
        """The line that replaces the shell with the program, assignments exported to it."""
        return f"{self.prefix}exec {self.rest}"

    @property
    def program_name(self) -> str | None:
        """The program word after quote removal, or None when it holds an expansion
        (known only when run.sh runs)."""
        return unquoted(self.program)


def _skip_quoted(line: str, i: int) -> int:
    """From a quote, backslash or substitution at ``i``: the index just past it."""
    ch = line[i]
    if ch == "\\":
        if i + 1 >= len(line):
            raise CommandError("ends with a backslash (a line continuation: the command must be one line)")
        return i + 2
    if ch == "'":
        end = line.find("'", i + 1)
        if end < 0:
            raise CommandError(f"has an unclosed single quote (') opened at character {i + 1}")
        return end + 1
    if ch == '"':
        j = i + 1
        while j < len(line):
            c = line[j]
            if c == '"':
                return j + 1
            if c == "\\":
                j += 2
            elif c in "$`":
                j = _skip_substitution(line, j) if c == "`" or line.startswith(("$(", "${"), j) else j + 1
            else:
                j += 1
        raise CommandError(f'has an unclosed double quote (") opened at character {i + 1}')
    return _skip_substitution(line, i)


def _skip_substitution(line: str, i: int) -> int:
    """From ``$(``, ``$((``, ``${`` or a backquote at ``i``: the index just past its end."""
    if line[i] == "`":
        j = i + 1
        while j < len(line):
            if line[j] == "\\":
                j += 2
            elif line[j] == "`":
                return j + 1
            else:
                j += 1
        raise CommandError(f"has an unclosed backquote (`) opened at character {i + 1}")
    opener, closer = ("(", ")") if line[i + 1] == "(" else ("{", "}")
    what = "$(...)" if opener == "(" else "${...}"
    depth, j = 1, i + 2
    while j < len(line):
        c = line[j]
        if c in "\\'\"`" or (c == "$" and line.startswith(("$(", "${"), j)):
            j = _skip_quoted(line, j)
            continue
        if c == opener:
            depth += 1
        elif c == closer:
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    raise CommandError(f"has an unclosed {what} opened at character {i + 1}")


def tokens(command: str) -> list[Token]:
    """The command's words and redirections, as written; a comment ends it."""
    out: list[Token] = []
    i, n = 0, len(command)
    while i < n:
        ch = command[i]
        if ch in _BLANKS:
            i += 1
            continue
        if ch == "#":
            break  # a comment, to the end of the line
        start = i
        # A redirection: an optional descriptor number, the operator, then its target word.
        m = re.match(r"[0-9]*(<<-|<<|>>|<&|>&|<>|>\||<|>)", command[i:])
        if m:
            if m.group(1).startswith("<<"):
                raise CommandError(f"has a here-document ({m.group(1)}) at character {i + 1}: it needs more lines")
            i += m.end()
            while i < n and command[i] in _BLANKS:
                i += 1
            end = _word_end(command, i)
            if end == i:
                raise CommandError(f"has a redirection ({m.group(1)}) at character {start + 1} with no target")
            out.append(Token(command[start:end], start, redirection=True))
            i = end
            continue
        if ch in _OPERATORS:
            raise CommandError(f"has {ch!r} at character {i + 1}: it must be one simple command (a program, its "
                               "arguments and any NAME=value before it), not a list, pipeline, background job or "
                               "subshell; put those in a script in the folder and start that")
        end = _word_end(command, i)
        out.append(Token(command[start:end], start))
        i = end
    return out


def _word_end(command: str, i: int) -> int:
    n = len(command)
    while i < n and command[i] not in _BLANKS and command[i] not in _OPERATORS and command[i] not in _REDIRECTIONS:
        if command[i] in "\\'\"`" or (command[i] == "$" and command.startswith(("$(", "${"), i)):
            i = _skip_quoted(command, i)
        else:
            i += 1
    return i


def parse(command: str) -> SimpleCommand:
    """The command as one simple command, or ``CommandError`` saying what is wrong."""
    if "\n" in command or "\r" in command or "\0" in command:
        raise CommandError("must be one line")
    for token in tokens(command):
        if token.redirection or _ASSIGNMENT.match(token.text):
            continue
        if token.text in RESERVED_WORDS:
            raise CommandError(f"starts with the shell word {token.text!r}: it must be one simple command; put a "
                               "compound command in a script in the folder and start that")
        return SimpleCommand(command, command[:token.start], token.text, command[token.start:])
    raise CommandError("names no program to start (only NAME=value assignments or redirections)")


def unquoted(word: str) -> str | None:
    """A word after quote removal, or None when it holds an expansion ($, backquote)."""
    out: list[str] = []
    i = 0
    while i < len(word):
        ch = word[i]
        if ch == "\\":
            out.append(word[i + 1:i + 2])
            i += 2
        elif ch == "'":
            end = word.index("'", i + 1)
            out.append(word[i + 1:end])
            i = end + 1
        elif ch == '"':
            end = _skip_quoted(word, i) - 1
            inner = word[i + 1:end]
            if "$" in inner or "`" in inner:
                return None
            out.append(re.sub(r'\\([$`"\\])', r"\1", inner))
            i = end + 1
        elif ch in "$`":
            return None
        else:
            out.append(ch)
            i += 1
    text = "".join(out)
    return None if text.startswith("~") else text
