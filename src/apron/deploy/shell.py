"""Shell scripts read the way bash reads them, far enough to find the `vllm serve` they run.

What bash does and this module mirrors (bash(1), QUOTING, PARAMETER EXPANSION, REDIRECTION):
- a backslash before a newline joins the lines; one on the last line with nothing after it joins
  nothing; inside single quotes a backslash is literal;
- `#` at the start of a word starts a comment to the end of that physical line, even on a line a
  continuation joined: the command ends there and the next line is a new command;
- `;`, `&`, `&&`, `||`, `|` and newlines end a simple command; redirections (`> log`, `2>&1`,
  `&> out`, `< in`) belong to the command but are not its words;
- leading `NAME=value` words are the command's environment; a command made only of them (or
  `export NAME=value`) sets a variable for the rest of the script;
- `$NAME`, `${NAME}`, `${NAME:-default}`, `${NAME-default}`, `${NAME:=default}` expand from what the
  script set before (and from the environment the caller gives, e.g. SkyPilot's envs); an unquoted
  expansion splits into words on blanks. What the script does not set is left as written and
  reported as unresolved, never guessed. `$(...)` and backquotes are not run, and `$1`, `$@` are the
  caller's arguments: unresolved too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from apron.errors import BadInput
from apron.frozen import frozen

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.S)


@frozen
class Word:
    text: str
    line: int  # 1-based, in the script
    unresolved: tuple[str, ...] = ()  # the variables (or substitutions) left as written


@frozen
class Variable:
    value: str
    line: int  # where the script sets it; 0: given by the caller (SkyPilot envs, a container's env)
    unresolved: tuple[str, ...] = ()  # what its value left unexpanded


@frozen
class Command:
    """One simple command: its environment prefix and its words (redirections dropped)."""

    env: tuple[tuple[str, str, int], ...]
    words: tuple[Word, ...]
    first_line: int
    last_line: int
    ended_by_comment: bool = False  # a comment line inside a continuation cut it short (bash does)
    exported: tuple[tuple[str, Variable], ...] = ()  # the environment the script exported before it


@dataclass
class Script:
    commands: list[Command] = field(default_factory=list)
    variables: dict[str, Variable] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def read_script(text: str, where: str, env: dict[str, str] | None = None) -> Script:
    """Every simple command of the script, with variables substituted as bash would at that point."""
    return _Reader(text, where, dict(env or {})).run()


class _Reader:
    def __init__(self, text: str, where: str, env: dict[str, str]) -> None:
        self.text = text.replace("\r\n", "\n")
        self.where = where
        self.script = Script(variables={k: Variable(v, 0) for k, v in env.items()})
        self.exported = dict(self.script.variables)  # the caller's environment is the process's
        self.i = 0
        self.line = 1
        self.heredocs: list[tuple[str, bool]] = []  # delimiters whose bodies follow the current line

    def _at(self) -> str:
        return f"{self.where}: line {self.line}" if self.where else f"line {self.line}"

    def run(self) -> Script:
        while self.i < len(self.text):
            self._command()
        return self.script

    # -------------------------------------------------------------- commands

    def _command(self) -> None:
        words: list[Word] = []
        first, cut = self.line, False
        while self.i < len(self.text):
            ch = self.text[self.i]
            if ch == "\\" and self.text[self.i + 1 : self.i + 2] == "\n":
                self.i += 2
                self.line += 1
            elif ch == "\\" and self.i == len(self.text) - 1:  # at the end of the file it joins nothing
                self.i += 1
            elif ch in " \t":
                self.i += 1
            elif ch == "\n":
                self._newline()
                break
            elif ch == "#":
                cut = self.line > first and bool(words)  # a comment line inside a continuation
                end = self.text.find("\n", self.i)
                self.i = len(self.text) if end < 0 else end
            elif self.text.startswith(("&>", ">", "<"), self.i):
                self._redirection()
            elif ch in ";&|()":
                self.i += 2 if self.text[self.i : self.i + 2] in ("&&", "||", ";;", "|&") else 1
                break
            else:
                words += self._word()
        self._finish(words, first, cut)

    def _newline(self) -> None:
        self.i += 1
        self.line += 1
        for delimiter, strip_tabs in self.heredocs:  # skip each here-document's body
            while self.i < len(self.text):
                end = self.text.find("\n", self.i)
                end = len(self.text) if end < 0 else end
                body_line = self.text[self.i : end]
                self.i, self.line = min(end + 1, len(self.text)), self.line + 1
                if (body_line.lstrip("\t") if strip_tabs else body_line) == delimiter:
                    break
        self.heredocs = []

    def _redirection(self) -> None:
        """`> log`, `2>&1`, `&> out`, `< in`, `<<EOF`: part of the command, not its words."""
        rest = self.text[self.i :]
        match = re.match(r"&>>?|<<-?|<<<|>>|>&|<&|>\||<>|>|<", rest)
        assert match is not None
        self.i += match.end()
        op = match.group(0)
        if op in (">&", "<&") and re.match(r"\d+|-", self.text[self.i :]):
            self.i += re.match(r"\d+|-", self.text[self.i :]).end()  # type: ignore[union-attr]
            return
        while self.i < len(self.text) and self.text[self.i] in " \t":
            self.i += 1
        target = self._word()
        if op.startswith("<<") and op != "<<<" and target:
            self.heredocs.append((target[0].text, op == "<<-"))

    def _finish(self, words: list[Word], first: int, cut: bool) -> None:
        env: list[tuple[str, str, int]] = []
        assigned: list[Word] = []
        while words and (match := _ASSIGNMENT.fullmatch(words[0].text)):
            env.append((match.group(1), match.group(2), words[0].line))
            assigned.append(words[0])
            words = words[1:]
        if not words:
            for (name, value, line), word in zip(env, assigned, strict=True):  # a shell variable from here on
                self.script.variables[name] = Variable(value, line, word.unresolved)
                if name in self.exported:  # an exported variable stays exported with its new value
                    self.exported[name] = self.script.variables[name]
            return
        if words[0].text in ("export", "declare", "typeset", "readonly", "local"):
            for word in words[1:]:
                match = _ASSIGNMENT.fullmatch(word.text)
                if match:
                    self.script.variables[match.group(1)] = Variable(match.group(2), word.line, word.unresolved)
                if words[0].text == "export" or words[1:2] and words[1].text.startswith("-") and "x" in words[1].text:
                    name = match.group(1) if match else word.text
                    if name in self.script.variables:
                        self.exported[name] = self.script.variables[name]
            return
        last = max(w.line for w in words)
        exported = tuple(self.exported.items())
        self.script.commands.append(Command(tuple(env), tuple(words), first, last, cut, exported))

    # -------------------------------------------------------------- words

    def _word(self) -> list[Word]:
        """One shell word, expanded; an unquoted expansion may split it into several. A word of digits
        right before `>` or `<` is a file descriptor (`2>&1`), so it is dropped with the redirection."""
        line = self.line
        fields: list[str] = []
        parts: list[str] = []
        unresolved: list[str] = []
        quoted = False
        while self.i < len(self.text):
            ch = self.text[self.i]
            if ch in " \t\n;&|()":
                break
            if ch in "<>":
                if not quoted and not fields and "".join(parts).isdigit():
                    self._redirection()
                    return []
                break
            if ch == "\\":
                nxt = self.text[self.i + 1 : self.i + 2]
                self.i += 2
                if nxt == "\n":
                    self.line += 1
                else:
                    parts.append(nxt)
            elif ch == "'":
                end = self.text.find("'", self.i + 1)
                if end < 0:
                    raise BadInput(f"{self._at()}: a single quote is never closed")
                parts.append(self.text[self.i + 1 : end])
                self.line += self.text.count("\n", self.i, end)
                self.i, quoted = end + 1, True
            elif ch == '"':
                parts.append(self._double_quoted(unresolved))
                quoted = True
            elif ch in "$`" and (value := self._expansion(unresolved)) is not None:
                pieces = value.split()  # an unquoted expansion splits on blanks
                if pieces and value[:1].isspace() and parts:
                    fields.append("".join(parts))
                    parts = []
                for n, piece in enumerate(pieces):
                    if n:
                        fields.append("".join(parts))
                        parts = []
                    parts.append(piece)
                if pieces and value[-1:].isspace():
                    fields.append("".join(parts))
                    parts = []
            else:
                parts.append(ch)
                self.i += 1
        if parts or quoted:
            fields.append("".join(parts))
        missing = tuple(dict.fromkeys(unresolved))
        return [Word(f, line, missing) for f in fields if f or quoted]

    def _double_quoted(self, unresolved: list[str]) -> str:
        self.i += 1
        out: list[str] = []
        while self.i < len(self.text):
            ch = self.text[self.i]
            if ch == '"':
                self.i += 1
                return "".join(out)
            if ch == "\\" and self.text[self.i + 1 : self.i + 2] in ('"', "\\", "$", "`", "\n"):
                nxt = self.text[self.i + 1]
                if nxt == "\n":
                    self.line += 1
                else:
                    out.append(nxt)
                self.i += 2
                continue
            if ch in "$`" and (value := self._expansion(unresolved)) is not None:
                out.append(value)
                continue
            if ch == "\n":
                self.line += 1
            out.append(ch)
            self.i += 1
        raise BadInput(f"{self._at()}: a double quote is never closed")

    def _expansion(self, unresolved: list[str]) -> str | None:
        """The value of `$NAME`, `${...}`, `$(...)`, `` `...` `` at self.i; None if the `$` is literal."""
        rest = self.text[self.i :]
        if rest.startswith(("$(", "`")):
            end = _closing(rest)
            self.line += rest.count("\n", 0, end)
            self.i += end
            unresolved.append(rest[:end])
            return rest[:end]
        if rest.startswith("${"):
            end = rest.find("}")
            if end < 0:
                raise BadInput(f"{self._at()}: '${{' is never closed")
            self.i += end + 1
            return self._parameter(rest[2:end], rest[: end + 1], unresolved)
        if rest[1:2] and (rest[1].isdigit() or rest[1] in "@*"):  # the script's own arguments: its caller's
            self.i += 2
            unresolved.append(rest[:2])
            return rest[:2]
        match = _NAME.match(rest, 1)
        if match is None:
            return None
        self.i += match.end()
        return self._parameter(match.group(0), rest[: match.end()], unresolved)

    def _parameter(self, body: str, written: str, unresolved: list[str]) -> str:
        match = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-=+])(.*))?", body, re.S)
        if match is None:  # ${X%% *}, ${#X}, ${X/a/b}: not evaluated
            unresolved.append(written)
            return written
        name, op, default = match.groups()
        value = self.script.variables.get(name)
        is_set = value is not None and not ((op or "").startswith(":") and value.value == "")
        if op and op.endswith("+"):
            return self._expand_text(default, unresolved) if is_set else ""
        if is_set:
            assert value is not None
            unresolved += value.unresolved
            return value.value
        if op:
            expanded = self._expand_text(default, unresolved)
            if op.endswith("="):
                self.script.variables[name] = Variable(expanded, self.line)
            return expanded
        unresolved.append(written)
        return written

    def _expand_text(self, text: str, unresolved: list[str]) -> str:
        """A default like ${A:-$B} expands too (as inside double quotes)."""
        inner = _Reader('"' + text.replace('"', '\\"') + '"', self.where, {})
        inner.script.variables = self.script.variables
        inner.line = self.line
        return inner._double_quoted(unresolved)


def _closing(text: str) -> int:
    """Length of the `$(...)` or `` `...` `` that starts text (nested parentheses counted)."""
    if text.startswith("`"):
        end = text.find("`", 1)
        return len(text) if end < 0 else end + 1
    depth = 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def split_words(text: str, where: str, env: dict[str, str] | None = None) -> list[Word]:
    """One command line's words, as `read_script` reads them (used for a string field holding a command)."""
    script = read_script(text, where, env)
    return [w for command in script.commands for w in command.words]
