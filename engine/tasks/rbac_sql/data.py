"""Reading Spider-AC rows: `{db_id, user, query, question, ground_truth_label, access_policy_sql,
schema_ddl}` (some releases add `decision`). A label that begins with `ERROR` means the role may not run
the query (DENY); any other label (`[]`, `[[...]]`: the first result rows) means PERMIT."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from engine.errors import InputError
from engine.jsonl import read_jsonl, require
from engine.tasks.rbac_sql.database import parse_ddl
from engine.tasks.rbac_sql.grants import RoleGrants, grants_for, parse_policy

DECISIONS = ("PERMIT", "DENY")


def decision_of(label: str) -> str:
    return "DENY" if label.lstrip().startswith("ERROR") else "PERMIT"


@dataclass
class Row:
    line: int          # 1-based line in its file
    db_id: str
    user: str
    query: str
    question: str
    label: str
    policy_sql: str
    schema_ddl: str
    decision: str      # PERMIT | DENY
    policy: dict[str, RoleGrants]

    @property
    def grants(self) -> RoleGrants:
        return grants_for(self.policy, self.user)

    @cached_property
    def schema(self) -> dict[str, list[str]]:
        """{table: columns} as the DDL names them (PostgreSQL's case folding applied)."""
        return {t.name: [c.name for c in t.columns] for t in parse_ddl(self.schema_ddl)}


def load_rows(path) -> list[Row]:
    path = Path(path)
    rows: list[Row] = []
    policies: dict[tuple[str, str], dict] = {}  # one policy text is shared by a database's rows
    ddl_ok: set[str] = set()
    for line, obj in read_jsonl(path):
        fields = {f: require(obj, f, str, path=path, line=line)
                  for f in ("db_id", "user", "query", "question", "ground_truth_label", "access_policy_sql",
                            "schema_ddl")}
        for f in ("db_id", "user", "query"):
            if not fields[f].strip():
                raise InputError("must not be empty", path=path, line=line, field=f)
        label = fields["ground_truth_label"]
        decision = decision_of(label)
        if "decision" in obj:
            given = obj["decision"]
            if given not in DECISIONS:
                raise InputError(f"expected PERMIT or DENY, got {given!r}", path=path, line=line, field="decision")
            if given != decision:
                raise InputError(f"{given} contradicts the label ({decision}: {label[:40]!r})", path=path,
                                 line=line, field="decision")
        key = (fields["db_id"], fields["access_policy_sql"])
        if key not in policies:
            policies[key] = parse_policy(fields["access_policy_sql"], fields["db_id"], path=path, line=line)
        if fields["schema_ddl"] not in ddl_ok:
            parse_ddl(fields["schema_ddl"], path=path, line=line)
            ddl_ok.add(fields["schema_ddl"])
        rows.append(Row(line, fields["db_id"], fields["user"], fields["query"], fields["question"], label,
                        fields["access_policy_sql"], fields["schema_ddl"], decision, policies[key]))
    return rows
