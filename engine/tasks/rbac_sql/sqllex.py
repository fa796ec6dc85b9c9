"""A small SQL tokenizer: enough to find the tables a query names (in PostgreSQL's range-table order) and
the join forms (USING, NATURAL) whose columns SQLite's authorizer does not report. Comments and string
literals are skipped, so text inside them is never taken for a keyword or a table."""
from __future__ import annotations

import re
from dataclasses import dataclass

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<comment>--[^\n]*|/\*.*?(?:\*/|\Z))
  | (?P<string>'(?:[^']|'')*(?:'|\Z))
  | (?P<qident>"(?:[^"]|"")*(?:"|\Z)|`(?:[^`]|``)*(?:`|\Z)|\[[^\]]*(?:\]|\Z))
  | (?P<word>[^\W\d][\w$]*)
  | (?P<number>\d[\w.]*|\.\d\w*)
  | (?P<op>.)
""", re.S | re.X)

# keywords that end a FROM list at the same parenthesis depth
_END_FROM = {"where", "group", "order", "having", "limit", "union", "intersect", "except", "window", "select",
             "values", "offset", "returning"}


@dataclass(frozen=True)
class Token:
    kind: str   # word | qident | string | number | op
    value: str  # words and quoted identifiers lowercased and unquoted (SQLite compares names without case)
    pos: int


def tokens(sql: str) -> list[Token]:
    out = []
    for m in _TOKEN.finditer(sql):
        kind, text = m.lastgroup, m.group()
        if kind in ("ws", "comment"):
            continue
        if kind == "qident":
            body = text[1:-1] if len(text) > 1 and text[-1] in "\"`]" else text[1:]
            value = body.replace('""', '"').replace("``", "`").lower()
        elif kind == "word":
            value = text.lower()
        else:
            value = text
        out.append(Token(kind, value, m.start()))
    return out


def _ident(t: Token) -> bool:
    return t.kind in ("word", "qident")


def table_order(sql: str, tables) -> list[str]:
    """The tables of `tables` (lowercase names) that the query names in a FROM list or after JOIN, in
    text order: the order of PostgreSQL's range table, whose first failing entry its error names."""
    seen: list[str] = []
    for t in from_tables(sql, tables):
        if t not in seen:
            seen.append(t)
    return seen


def identifiers(sql: str) -> set[str]:
    """Every name in the query (lowercase), keywords included."""
    return {t.value for t in tokens(sql) if _ident(t)}


def from_tables(sql: str, tables) -> list[str]:
    """Each mention of a table of `tables` in a FROM list or after JOIN, in text order, repeats kept."""
    wanted, seen = set(tables), []
    toks = tokens(sql)
    depth, in_from, expect = 0, {0: False}, False
    for i, t in enumerate(toks):
        if t.kind == "op":
            if t.value == "(":
                depth += 1
                in_from[depth] = False
                expect = False
            elif t.value == ")":
                in_from.pop(depth, None)
                depth = max(depth - 1, 0)
                expect = False
            elif t.value == "," and in_from.get(depth):
                expect = True
            elif t.value == ".":
                continue  # schema.table: the name after the dot is still the table
            else:
                expect = False
            continue
        if t.kind == "word" and t.value in ("from", "join"):
            in_from[depth] = True
            expect = True
            continue
        if t.kind == "word" and t.value in _END_FROM:
            in_from[depth] = False
            expect = False
            continue
        if expect and _ident(t):
            nxt = toks[i + 1] if i + 1 < len(toks) else None
            if nxt is not None and nxt.kind == "op" and nxt.value == ".":
                continue  # a schema name; the table follows the dot
            if t.value in wanted:
                seen.append(t.value)
            expect = False
    return seen


def using_columns(sql: str) -> list[str]:
    """Column names in every `USING (a, b)` join of the query."""
    toks, cols = tokens(sql), []
    for i, t in enumerate(toks):
        if t.kind == "word" and t.value == "using" and i + 1 < len(toks) and toks[i + 1].value == "(":
            j = i + 2
            while j < len(toks) and not (toks[j].kind == "op" and toks[j].value == ")"):
                if _ident(toks[j]):
                    cols.append(toks[j].value)
                j += 1
    return cols


def has_natural_join(sql: str) -> bool:
    return any(t.kind == "word" and t.value == "natural" for t in tokens(sql))


def split_statements(text: str, token_re: re.Pattern) -> list[tuple[int, list[str]]]:
    """(1-based line, tokens) per statement of a script, split at semicolons outside quotes;
    whitespace and comments (tokens starting with '--' or '/*') are dropped."""
    out, cur, line, start = [], [], 1, None
    for m in token_re.finditer(text):
        tok = m.group()
        if tok.isspace() or tok.startswith("--") or tok.startswith("/*"):
            line += tok.count("\n")
            continue
        if start is None:
            start = line
        line += tok.count("\n")
        if tok == ";":
            out.append((start, cur))
            cur, start = [], None
        else:
            cur.append(tok)
    if cur:
        out.append((start, cur))
    return out
