"""Spider-AC's access policies: PostgreSQL GRANT statements parsed into what each role may read.

Understood forms (keywords in any case; identifiers unquoted, which PostgreSQL folds to lower case, or
"quoted"):
    GRANT USAGE ON SCHEMA s TO r;
    GRANT SELECT (c1, c2) ON [TABLE] s.t TO r;        -- column privileges
    GRANT SELECT ON [TABLE] s.t, s.u TO r1, r2;       -- the whole table
    GRANT ALL [PRIVILEGES] ON s.t TO r;               -- includes SELECT
    GRANT SELECT, INSERT (c) ON s.t TO r;             -- only the SELECT part matters to a reader
    GRANT SELECT ON ALL TABLES IN SCHEMA s TO r;
Grants to PUBLIC apply to every role. Anything else (REVOKE, grants on functions, ...) is an InputError
naming the statement's line, so a policy is never half understood.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from engine.errors import InputError
from engine.tasks.rbac_sql.sqllex import split_statements

_TOK = re.compile(r'\s+|--[^\n]*|"(?:[^"]|"")*"|[(),.;]|[^\s(),.;"]+', re.S)


@dataclass
class RoleGrants:
    """What one role may SELECT. Table and column names are lowercase: PostgreSQL folds unquoted names,
    and SQLite (where the guard runs the query) compares names without case."""
    role: str
    tables: dict[str, frozenset[str] | None] = field(default_factory=dict)  # None: every column
    all_tables: bool = False  # SELECT ON ALL TABLES IN SCHEMA
    schemas: set[str] = field(default_factory=set)  # USAGE

    def may_use(self, table: str) -> bool:
        """Any SELECT privilege on the table: what PostgreSQL requires of a table read for no column
        (`SELECT count(*) FROM t`)."""
        table = table.lower()
        if table.startswith("sqlite_"):
            return False  # SQLite's own tables are nobody's to read
        if self.all_tables:
            return True
        cols = self.tables.get(table, frozenset())
        return cols is None or bool(cols)

    def may_read(self, table: str, column: str) -> bool:
        table, column = table.lower(), column.lower()
        if not column:
            return self.may_use(table)
        if table.startswith("sqlite_"):
            return False
        if self.all_tables:
            return True
        cols = self.tables.get(table)
        if table not in self.tables:
            return False
        return cols is None or column in cols

    def readable(self, schema: dict[str, list[str]]) -> dict[str, list[str]]:
        """{table: readable columns} over a schema {table: columns}, in the schema's order."""
        out = {}
        for table, cols in schema.items():
            shown = [c for c in cols if self.may_read(table, c)]
            if shown:
                out[table] = shown
        return out

    def merged(self, other: "RoleGrants") -> "RoleGrants":
        tables = dict(self.tables)
        for t, cols in other.tables.items():
            mine = tables.get(t, frozenset())
            tables[t] = None if cols is None or mine is None else mine | cols
        return RoleGrants(self.role, tables, self.all_tables or other.all_tables, self.schemas | other.schemas)


def _ident(tok: str) -> str:
    if tok.startswith('"'):
        return tok[1:-1].replace('""', '"').lower()
    return tok.lower()


class _Stmt:
    def __init__(self, toks: list[str], err):
        self.toks, self.i, self.err = toks, 0, err

    def peek(self, k: int = 0) -> str | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def kw(self, *words: str) -> bool:
        """Consume the keywords if they come next."""
        for k, w in enumerate(words):
            tok = self.peek(k)
            if tok is None or tok.upper() != w:
                return False
        self.i += len(words)
        return True

    def expect(self, word: str) -> None:
        if not self.kw(word):
            self.err(f"expected {word}, got {self.peek() or 'the end of the statement'!r}")

    def name(self) -> str:
        tok = self.peek()
        if tok is None or tok in "(),.;":
            self.err(f"expected a name, got {tok or 'the end of the statement'!r}")
        self.i += 1
        return _ident(tok)

    def qualified(self) -> str:
        """schema.table -> table (one database per policy: the schema only scopes it)."""
        name = self.name()
        while self.peek() == ".":
            self.i += 1
            name = self.name()
        return name

    def names_in_parens(self) -> list[str]:
        self.expect("(")
        names = [self.name()]
        while self.peek() == ",":
            self.i += 1
            names.append(self.name())
        self.expect(")")
        return names


_PRIVS = {"SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER", "ALL"}


def parse_policy(text: str, db_id: str | None = None, *, path=None, line: int | None = None
                 ) -> dict[str, RoleGrants]:
    """{role: RoleGrants}. Grantees named `<db_id>_<role>` (Spider-AC's form) are keyed by `<role>`,
    lowercased. With `path`/`line` (a JSONL row) errors name that row and the policy line in the field."""
    roles: dict[str, RoleGrants] = {}
    prefix = f"{db_id}_".lower() if db_id else None
    for stmt_line, toks in split_statements(text, _TOK):
        def err(msg, _l=stmt_line):
            if path is not None:
                raise InputError(f"access policy line {_l}: {msg}", path=path, line=line,
                                 field=f"access_policy_sql:{_l}")
            raise InputError(f"access policy: {msg}", line=_l, field="access_policy_sql")
        if not toks:
            continue
        s = _Stmt(toks, err)
        if not s.kw("GRANT"):
            err(f"only GRANT statements are understood, got {toks[0]!r}")
        columns, table_priv, usage = set(), False, False
        # privilege list: priv [(cols)] [, priv [(cols)]]...
        while True:
            tok = (s.peek() or "").upper()
            if tok == "USAGE":
                s.i += 1
                usage = True
            elif tok in _PRIVS:
                s.i += 1
                if tok == "ALL":
                    s.kw("PRIVILEGES")
                is_select = tok in ("SELECT", "ALL")
                if s.peek() == "(":
                    cols = s.names_in_parens()
                    if is_select:
                        columns.update(cols)
                elif is_select:
                    table_priv = True
            else:
                err(f"unknown privilege {s.peek() or 'nothing'!r}")
            if s.peek() == ",":
                s.i += 1
                continue
            break
        s.expect("ON")
        targets, schema_targets, all_in_schema = [], [], False
        if s.kw("SCHEMA"):
            schema_targets.append(s.name())
            while s.peek() == ",":
                s.i += 1
                schema_targets.append(s.name())
        elif s.kw("ALL", "TABLES", "IN", "SCHEMA"):
            all_in_schema = True
            schema_targets.append(s.name())
        else:
            if (s.peek() or "").upper() in ("FUNCTION", "PROCEDURE", "ROUTINE", "SEQUENCE", "DATABASE",
                                            "DOMAIN", "TYPE", "LANGUAGE", "TABLESPACE", "FOREIGN", "LARGE"):
                err(f"grants on {s.peek().upper()} objects are not understood")
            s.kw("TABLE")
            targets.append(s.qualified())
            while s.peek() == ",":
                s.i += 1
                targets.append(s.qualified())
        s.expect("TO")
        grantees = []
        while True:
            s.kw("GROUP")
            grantees.append(s.name())
            if s.peek() != ",":
                break
            s.i += 1
        s.kw("WITH", "GRANT", "OPTION")
        if s.peek() is not None:
            err(f"unexpected {s.peek()!r} at the end of the statement")
        if usage and (columns or table_priv):
            err("USAGE cannot be granted together with table privileges")
        if usage and not schema_targets:
            err("USAGE is granted ON SCHEMA")
        if schema_targets and not usage and not all_in_schema:
            err("only USAGE is granted ON SCHEMA")
        for grantee in grantees:
            key = grantee[len(prefix):] if prefix and grantee.startswith(prefix) else grantee
            g = roles.setdefault(key, RoleGrants(key))
            if usage:
                g.schemas.update(schema_targets)
            elif all_in_schema:
                if table_priv or columns:
                    g.all_tables = True
            else:
                for t in targets:
                    have = g.tables.get(t, frozenset())
                    if table_priv or have is None:
                        g.tables[t] = None
                    elif columns:
                        g.tables[t] = have | frozenset(columns)
    return roles


def grants_for(policy: dict[str, RoleGrants], role: str) -> RoleGrants:
    """The role's grants plus those to PUBLIC; a role the policy never names may read nothing."""
    key = role.lower()
    mine = policy.get(key, RoleGrants(key))
    public = policy.get("public")
    return mine.merged(public) if public is not None else mine


def role_grant_sql(policy_text: str, role: str, db_id: str | None = None) -> str:
    """The lines of a policy that grant something to this role (the role's part of the prompt)."""
    names = {role.lower(), f"{db_id}_{role}".lower() if db_id else role.lower(), "public"}
    keep = []
    for stmt in policy_text.split(";"):
        m = re.search(r"\bTO\s+(.+)$", stmt.strip(), re.I | re.S)
        if not m:
            continue
        grantees = re.sub(r"(?i)\bWITH\s+GRANT\s+OPTION\b", "", m.group(1)).split(",")
        if {_ident(g.strip()) for g in grantees} & names:
            keep.append(stmt.strip() + ";")
    return "\n".join(keep)
