"""`akmc fmt`'s printer: one canonical layout of a `.akm` source, keeping every token as written.

The printer works on the concrete syntax tree (every token kept, from the same grammar file) and
changes only the space between tokens, with these rules:

- two-space indentation; one space around `=`, `|` and `->`, after `:` and `,`; none inside `[]`
  and `()`, one inside the braces of an inline object (`{ max = 1 }`); two spaces before a
  param's description;
- a block (`step x { … }`, `params { … }`, …) written on one line stays on one line, its items two
  spaces apart; a block written over several lines gets one item per line. A bracketed list
  (`[…]`, `{ a = 1, … }`, `(…)`) written over several lines gets one element per line, each with a
  trailing comma; written on one line, it stays there without one;
- at most one blank line between items, none after `{` or before `}`; one newline at the end;
- settings (`NAME = value`) that stand one per line, or together in a one-line block, are put in
  a fixed order: concurrency, max_units, timeout, retry, on_error, max_loops, then any other;
- comments stay where they were: an own-line comment above the token that followed it, a trailing
  comment at the end of the line of the token it followed. A line that ends in `# akmc: ignore[…]`
  keeps exactly its tokens, so the suppression silences the same diagnostics;
- text blocks, strings, numbers and durations are printed byte for byte as written.

So the printed file parses to the same syntax tree (spans aside) and compiles to the same plan."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from functools import lru_cache

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedInput

from akmc import syntax
from akmc.diagnostics import Diagnostic, Report
from akmc.frontend.tables import grammar_parser
from akmc.syntax import MAX_NESTING

INDENT = "  "
SETTING_ORDER = ("concurrency", "fail_fast", "max_units", "timeout", "retry", "on_error", "max_loops")
_BLOCKS = frozenset(
    {
        "start",
        "params",
        "outputs",
        "limits",
        "defaults",
        "notify",
        "step",
        "parallel",
        "bindings",
        "map_block",
        "route_block",
        "gate",
        "env",
    }
)
_LISTS = frozenset({"inputs", "slist", "sobject", "list_value", "object_value", "object_type", "refinements"})
_OPENERS = {"LBRACE": "RBRACE", "LSQB": "RSQB", "LPAR": "RPAR"}
_TIGHT_BEFORE = frozenset({"COMMA", "RPAR", "RSQB", "DOT", "COLON", "OPTIONAL", "LPAR"})
_TIGHT_AFTER = frozenset({"LPAR", "LSQB", "DOT"})
_SUPPRESSION = re.compile(r"#\s*akmc:\s*ignore\s*\[")


class SyntaxProblem(Exception):
    """The source does not parse (or is not a source at all); `diagnostic` says why."""

    def __init__(self, diagnostic: Diagnostic) -> None:
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


@dataclass(slots=True)
class Formatted:
    """The printed text, and where each token and comment of the input moved (for mapping positions)."""

    text: str
    moves: list[tuple[int, int, int]] = field(default_factory=list)  # (old start, old end, new start), sorted

    def offset(self, old: int) -> int:
        """The new offset of a character offset of the input that lies in a token or a comment."""
        at = bisect.bisect_right(self.moves, (old, float("inf"), 0)) - 1
        if at < 0:
            return old
        start, _, new = self.moves[at]
        return new + (old - start)


@lru_cache(maxsize=1)
def _cst_parser() -> Lark:
    """The grammar with every token kept: the printer needs the brackets and keywords too."""
    return grammar_parser(keep_all_tokens=True, maybe_placeholders=False)


def tokens(text: str) -> list[Token]:
    """Every token of a source that parses, in order (comments and spaces are what lies between)."""
    return list(_cst_parser().parse(text).scan_values(lambda v: isinstance(v, Token)))


def format_source(text: str, file: str = "<stdin>") -> Formatted:
    """Print `text` in the canonical layout. Raises SyntaxProblem (E100–E101, the same diagnostic
    `akmc check` gives) when it does not parse; then nothing may be written."""
    try:
        tree = _cst_parser().parse(text)
    except UnexpectedInput:
        raise SyntaxProblem(_syntax_error(text, file)) from None
    if _depth(tree) > MAX_NESTING:  # the tree nests at least as deep as the values and types in it
        if syntax.parse(text, Report(file)) is None:  # E100: nested past the checker's limit
            raise SyntaxProblem(_syntax_error(text, file))
    return _Printer(text, tree).run()


def _syntax_error(text: str, file: str) -> Diagnostic:
    """The diagnostic `akmc check` gives a source that does not parse."""
    report = Report(file)
    syntax.parse(text, report)
    if report.diagnostics:
        return report.diagnostics[0]
    return Diagnostic("E100", "the source does not parse", file, syntax.end_of_file(text))


def _depth(tree: Tree[Token]) -> int:
    """How deep the tree nests, without recursion (a hostile file may nest thousands of levels)."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack += [(c, depth + 1) for c in node.children if isinstance(c, Tree)]
    return deepest


# -- comments and tokens ---------------------------------------------------------------------------


@dataclass(slots=True)
class _Comment:
    text: str
    start: int
    end: int
    blank_before: bool  # a blank line separated it from what came before


@dataclass(slots=True)
class _Attached:
    """What stands around one token in the source: own-line comments above it, a trailing comment."""

    above: list[_Comment] = field(default_factory=list)
    trailing: _Comment | None = None
    blank_before: bool = False
    glue: int | None = None  # the source line, when that line ends in a suppression comment


def _attach(text: str, tokens: list[Token]) -> list[_Attached]:
    """Comments live in the gaps between tokens (the grammar ignores only spaces and comments), so
    each gap is scanned: a comment on the line of the token before it trails that token; any other
    comment stands above the token after it. One more entry holds what follows the last token."""
    attached = [_Attached() for _ in range(len(tokens) + 1)]
    previous_end = 0
    for index in range(len(tokens) + 1):
        gap_end = tokens[index].start_pos if index < len(tokens) else len(text)
        assert gap_end is not None
        position = previous_end
        for match in re.finditer(r"#[^\n]*", text[previous_end:gap_end]):
            start = previous_end + match.start()
            comment = _Comment(
                match.group().rstrip(), start, previous_end + match.end(), text.count("\n", position, start) >= 2
            )
            if index > 0 and "\n" not in text[previous_end:start]:
                attached[index - 1].trailing = comment
            else:
                attached[index].above.append(comment)
            position = comment.end
        attached[index].blank_before = text.count("\n", position, gap_end) >= 2
        if index < len(tokens):
            previous_end = tokens[index].end_pos or 0
    # A line that ends in `# akmc: ignore[…]` silences what starts on it: its tokens stay together.
    for index, token in enumerate(tokens):
        trailing = attached[index].trailing
        if trailing is not None and _SUPPRESSION.search(trailing.text):
            line = token.end_line
            back = index
            while back >= 0 and tokens[back].line == line:
                attached[back].glue = line
                back -= 1
    return attached


# -- the printer ---------------------------------------------------------------------------------------


class _Printer:
    def __init__(self, text: str, tree: Tree[Token]) -> None:
        self.text = text
        self.tree = tree
        self.tokens: list[Token] = list(tree.scan_values(lambda v: isinstance(v, Token)))
        self.index = {id(t): i for i, t in enumerate(self.tokens)}
        self.around = _attach(text, self.tokens)
        self.lines: list[str] = []
        self.current = ""
        self.size = 0  # characters in self.lines, each with its newline
        self.moves: list[tuple[int, int, int]] = []
        self.last: Token | None = None
        self.break_after = False  # a trailing comment ended the line
        self.comment_at: int | None = None  # where that comment starts on the current line

    def run(self) -> Formatted:
        self.node(self.tree, 0, "", brk=True, items=True)
        end = self.around[len(self.tokens)]
        for comment in end.above:
            self.newline(0, blank=comment.blank_before)
            self.write_comment(comment)
        self.finish_line()
        text = "\n".join(self.lines) + "\n"
        return Formatted(text, sorted(self.moves))

    # -- the writer

    def finish_line(self) -> None:
        if self.current:
            self.lines.append(self.current.rstrip())
            self.size += len(self.lines[-1]) + 1
            self.current = ""

    def newline(self, indent: int, *, blank: bool = False) -> None:
        if self.current.strip():
            self.finish_line()
            if blank:
                self.lines.append("")
                self.size += 1
        self.current = INDENT * indent

    def write_comment(self, comment: _Comment) -> None:
        self.comment_at = len(self.current)
        if self.current.strip():
            self.current += " "
        self.moves.append((comment.start, comment.end, self.size + len(self.current)))
        self.current += comment.text
        self.break_after = True

    def put(
        self,
        token: Token,
        sep: str,
        indent: int,
        *,
        brk: bool = False,
        items: bool = False,
        comment_indent: int | None = None,
    ) -> None:
        """Write one token: after `sep` on the current line, or at the start of a new line indented
        `indent` when `brk` (the printer's layout) or a comment demands it. `items`: `brk` separates
        two items of a block, so a blank line of the source may stay."""
        here = self.around[self.index[id(token)]]
        for comment in here.above:
            self.newline(indent if comment_indent is None else comment_indent, blank=items and comment.blank_before)
            self.write_comment(comment)
        previous = self.around[self.index[id(self.last)]] if self.last is not None else None
        if here.glue is not None and previous is not None and previous.glue == here.glue and not here.above:
            if brk:  # the layout would break a line that silences diagnostics: keep its tokens together
                brk, sep = False, ("  " if items else " ")
        elif here.glue is not None and self.current.strip():
            brk = True  # a line that silences diagnostics starts where it started
        if brk or self.break_after or not self.current.strip():
            self.newline(indent, blank=items and here.blank_before)
            self.break_after = False
        else:
            self.current += sep
        start = token.start_pos or 0
        self.moves.append((start, token.end_pos or start, self.size + len(self.current)))
        piece = self._verbatim(token)  # first: a text block ends the lines it fills
        self.current += piece
        self.last = token
        if here.trailing is not None:
            self.write_comment(here.trailing)

    def comma(self, token: Token | None, indent: int) -> None:
        """A comma after an element (indented `indent`) of a list written over several lines; `None`:
        one the source left out. It goes before a trailing comment that ended the element's line."""
        here = self.around[self.index[id(token)]] if token is not None else _Attached()
        if self.break_after and not here.above and self.comment_at is not None:
            at = self.comment_at
            self.current = self.current[:at] + "," + self.current[at:]
            old, end, new = self.moves[-1]
            self.moves[-1] = (old, end, new + 1)
            if token is not None:
                start = token.start_pos or 0
                self.moves.append((start, token.end_pos or start, self.size + at))
                self.last = token
            if here.trailing is not None:  # a line holds one comment: the comma's own goes below
                self.newline(indent)
                self.write_comment(here.trailing)
            return
        if token is None:
            self.current += ","
            return
        self.put(token, "", indent + 1)

    def _verbatim(self, token: Token) -> str:
        """The token as written. A text block spans lines: what the printer writes after it lands on
        its last line, so the size of the lines it fills is counted here."""
        value = str(token)
        if "\n" not in value:
            return value
        head, *middle, tail = value.split("\n")
        self.lines.append(self.current + head)
        self.size += len(self.lines[-1]) + 1
        for line in middle:
            self.lines.append(line)
            self.size += len(line) + 1
        self.current = ""
        return tail

    # -- layout

    def node(
        self, node: Tree[Token] | Token, indent: int, sep: str = " ", brk: bool = False, items: bool = False
    ) -> None:
        """Print one node; its first token goes after `sep` (or on a new line when `brk`)."""
        if isinstance(node, Token):
            self.put(
                node, sep, indent + (0 if brk else 1), brk=brk, items=items, comment_indent=indent if brk else None
            )
            return
        kind = node.data
        if kind in _BLOCKS:
            self.block(node, indent, sep, brk, items)
        elif kind in _LISTS:
            self.bracketed(node, indent, sep, brk, items)
        else:
            self.inline(node.children, indent, sep, brk, items)

    def inline(self, children: list[Tree[Token] | Token], indent: int, sep: str, brk: bool, items: bool) -> None:
        previous: Token | None = None
        for position, child in enumerate(children):
            if position == 0:
                self.node(child, indent, sep, brk, items)
            else:
                first = _first_token(child)
                between = _space(previous, first)
                if (
                    child is children[-1]
                    and isinstance(child, Token)
                    and child.type == "STRING"
                    and previous is not None
                    and previous.type != "EQUAL"
                    and _is_description(children)
                ):
                    between = "  "
                self.node(child, indent, between)
            previous = _last_token(child)

    def block(self, node: Tree[Token], indent: int, sep: str, brk: bool, items_break: bool) -> None:
        children = node.children
        open_at = next(i for i, c in enumerate(children) if isinstance(c, Token) and c.type == "LBRACE")
        head, body, close = children[: open_at + 1], children[open_at + 1 : -1], children[-1]
        assert isinstance(close, Token)
        self.inline(head, indent, sep, brk, items_break)
        opener = children[open_at]
        assert isinstance(opener, Token)
        if not body and not self.around[self.index[id(close)]].above:
            self.put(close, "", indent)
            return
        several = "\n" in self.text[opener.end_pos or 0 : close.start_pos or 0]
        if node.data == "parallel":  # a block's settings first, then its steps
            settings = [c for c in body if isinstance(c, Tree) and c.data == "setting"]
            body = [*settings, *(c for c in body if not (isinstance(c, Tree) and c.data == "setting"))]
        ordered = _order(body, self.around, self.index)
        for position, item in enumerate(ordered):
            if several:
                self.node(item, indent + 1, "", brk=True, items=position > 0)
            else:
                self.node(item, indent, " " if position == 0 else "  ")
        if several:
            self.put(close, "", indent, brk=True, comment_indent=indent + 1)
        else:
            self.put(close, " ", indent + 1)

    def bracketed(self, node: Tree[Token], indent: int, sep: str, brk: bool, items: bool) -> None:
        children = node.children
        open_at = next(i for i, c in enumerate(children) if isinstance(c, Token) and c.type in _OPENERS)
        self.inline(children[: open_at + 1], indent, sep, brk, items)
        opener, close = children[open_at], children[-1]
        assert isinstance(opener, Token) and isinstance(close, Token)
        inner = children[open_at + 1 : -1]
        elements = [c for c in inner if not (isinstance(c, Token) and c.type == "COMMA")]
        commas = [c for c in inner if isinstance(c, Token) and c.type == "COMMA"]
        pad = " " if opener.type == "LBRACE" and elements else ""
        several = "\n" in self.text[opener.end_pos or 0 : close.start_pos or 0]
        for position, element in enumerate(elements):
            if several:
                self.node(element, indent + 1, "", brk=True, items=position > 0)
                self.comma(commas[position] if position < len(commas) else None, indent + 1)
            else:
                self.node(element, indent, pad if position == 0 else " ")
                if position < len(elements) - 1:
                    self.put(commas[position], "", indent + 1)
            # a one-line list's trailing comma is left out (a comment would have made it several lines)
        if several:
            self.put(close, "", indent, brk=True, comment_indent=indent + 1)
        else:
            self.put(close, pad, indent + 1)


def _first_token(node: Tree[Token] | Token) -> Token:
    while isinstance(node, Tree):
        node = node.children[0]
    return node


def _last_token(node: Tree[Token] | Token) -> Token:
    while isinstance(node, Tree):
        node = node.children[-1]
    return node


def _space(previous: Token | None, token: Token) -> str:
    if previous is None:
        return " "
    if token.type in _TIGHT_BEFORE or previous.type in _TIGHT_AFTER:
        return ""
    if token.type == "LSQB":
        return " " if previous.type == "EQUAL" else ""
    return " "


def _is_description(children: list[Tree[Token] | Token]) -> bool:
    """A param's trailing description string (`name: type [= default] "description"`)."""
    return len(children) >= 4 and isinstance(children[1], Token) and children[1].type == "COLON"


def _order(
    items: list[Tree[Token] | Token], around: list[_Attached], index: dict[int, int]
) -> list[Tree[Token] | Token]:
    """Settings in their fixed order, within each run of consecutive settings. A setting that shares
    a line silencing diagnostics with another item stays where it is (the line keeps its tokens)."""

    def movable(item: Tree[Token] | Token) -> bool:
        if not (isinstance(item, Tree) and item.data == "setting"):
            return False
        first, last = index[id(_first_token(item))], index[id(_last_token(item))]
        glue_first, glue_last = around[first].glue, around[last].glue
        shares_before = first > 0 and glue_first is not None and around[first - 1].glue == glue_first
        shares_after = glue_last is not None and around[last + 1].glue == glue_last
        return not (shares_before or shares_after)

    def rank(item: Tree[Token] | Token) -> int:
        assert isinstance(item, Tree)
        name = str(item.children[0])
        return SETTING_ORDER.index(name) if name in SETTING_ORDER else len(SETTING_ORDER)

    ordered: list[Tree[Token] | Token] = []
    run: list[Tree[Token] | Token] = []
    for item in [*items, None]:
        if item is not None and movable(item):
            run.append(item)
            continue
        ordered += sorted(run, key=rank)
        run = []
        if item is not None:
            ordered.append(item)
    return ordered
