"""A seeded generator of Spider-AC-format rows with their SQLite databases, small enough for a tiny model:
five databases of three or four tables with a few columns each, four roles with different column
grants, templated questions with simple gold SQL. Labels come from running the gold SQL under the row's
role through the guard (PERMIT: the first five result rows, as Spider-AC stores them; DENY:
`ERROR: permission denied for table t`), and each row's role is drawn so that PERMIT and DENY are
roughly balanced. Writes `<out>/<split>.jsonl` and `<out>/database/<db_id>/<db_id>.sqlite`."""
from __future__ import annotations

import os
import random
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from engine.jsonl import write_jsonl
from engine.tasks.rbac_sql.database import open_database, quote_ident, sqlite_type
from engine.tasks.rbac_sql.grants import grants_for, parse_policy
from engine.tasks.rbac_sql.guard import error_label, label_rows, outcome

ROLES = ("User_1", "User_2", "User_3", "User_4")


@dataclass
class Col:
    name: str
    kind: str            # id | name | cat | num | fk
    sing: str
    plural: str
    pool: str = ""       # values for name/cat columns; for fk the referenced table
    lo: int = 0
    hi: int = 0

    @property
    def pg_type(self) -> str:
        return "bigint" if self.kind in ("id", "fk", "num") else "text"


@dataclass
class Tab:
    name: str
    sing: str
    plural: str
    cols: list[Col] = field(default_factory=list)

    def of(self, *kinds: str) -> list[Col]:
        return [c for c in self.cols if c.kind in kinds]


POOLS = {
    "people": ["Alice", "Bob", "Carla", "Dan", "Eva", "Farid", "Grace", "Hugo", "Ines", "Jon", "Kim", "Lena",
               "Marco", "Nina", "Omar", "Paula", "Quinn", "Rosa", "Sam", "Tara"],
    "city": ["Paris", "Oslo", "Rome", "Lima", "Kyiv", "Cairo"],
    "title": ["engineer", "manager", "analyst", "clerk"],
    "dept": ["Sales", "Research", "Legal", "Support", "Finance", "Design"],
    "project": ["Apollo", "Boreal", "Cobalt", "Delta", "Ember", "Falcon", "Garnet", "Helix"],
    "status": ["open", "closed", "paused"],
    "product": ["lamp", "chair", "desk", "kettle", "mirror", "rug", "clock", "sofa", "shelf", "vase"],
    "category": ["home", "office", "kitchen"],
    "major": ["math", "biology", "history", "physics"],
    "course": ["Algebra", "Genetics", "Rome and Greece", "Optics", "Statistics", "Ecology", "Poetry"],
    "faculty": ["science", "arts"],
    "term": ["spring", "autumn"],
    "book": ["Dune", "Emma", "Ulysses", "Beloved", "Hamlet", "Walden", "Ivanhoe", "Rebecca", "Lolita"],
    "genre": ["novel", "drama", "essay"],
    "country": ["France", "Peru", "Japan", "Kenya"],
    "specialty": ["cardiology", "surgery", "pediatrics"],
    "diagnosis": ["flu", "fracture", "migraine"],
}


def _c(name, kind, sing, plural=None, pool="", lo=0, hi=0) -> Col:
    return Col(name, kind, sing, plural or sing + "s", pool, lo, hi)


DOMAINS: dict[str, list[Tab]] = {
    "company": [
        Tab("departments", "department", "departments", [
            _c("dept_id", "id", "id"), _c("dept_name", "name", "name", pool="dept"),
            _c("city", "cat", "city", "cities", pool="city"), _c("budget", "num", "budget", lo=100, hi=900)]),
        Tab("employees", "employee", "employees", [
            _c("emp_id", "id", "id"), _c("name", "name", "name", pool="people"),
            _c("title", "cat", "job title", pool="title"), _c("salary", "num", "salary", "salaries", lo=30, hi=150),
            _c("dept_id", "fk", "department", pool="departments")]),
        Tab("projects", "project", "projects", [
            _c("project_id", "id", "id"), _c("project_name", "name", "name", pool="project"),
            _c("status", "cat", "status", "statuses", pool="status"), _c("cost", "num", "cost", lo=10, hi=500),
            _c("dept_id", "fk", "department", pool="departments")]),
    ],
    "shop": [
        Tab("customers", "customer", "customers", [
            _c("customer_id", "id", "id"), _c("name", "name", "name", pool="people"),
            _c("city", "cat", "city", "cities", pool="city"), _c("age", "num", "age", lo=18, hi=80)]),
        Tab("products", "product", "products", [
            _c("product_id", "id", "id"), _c("product_name", "name", "name", pool="product"),
            _c("category", "cat", "category", "categories", pool="category"),
            _c("price", "num", "price", lo=5, hi=400)]),
        Tab("orders", "order", "orders", [
            _c("order_id", "id", "id"), _c("customer_id", "fk", "customer", pool="customers"),
            _c("status", "cat", "status", "statuses", pool="status"), _c("quantity", "num", "quantity", "quantities",
                                                                          lo=1, hi=20)]),
    ],
    "school": [
        Tab("students", "student", "students", [
            _c("student_id", "id", "id"), _c("name", "name", "name", pool="people"),
            _c("major", "cat", "major", pool="major"), _c("age", "num", "age", lo=17, hi=40)]),
        Tab("courses", "course", "courses", [
            _c("course_id", "id", "id"), _c("title", "name", "title", pool="course"),
            _c("faculty", "cat", "faculty", "faculties", pool="faculty"),
            _c("credits", "num", "credit count", lo=1, hi=10)]),
        Tab("enrollments", "enrollment", "enrollments", [
            _c("enrollment_id", "id", "id"), _c("student_id", "fk", "student", pool="students"),
            _c("term", "cat", "term", pool="term"), _c("grade", "num", "grade", lo=40, hi=100)]),
    ],
    "library": [
        Tab("authors", "author", "authors", [
            _c("author_id", "id", "id"), _c("name", "name", "name", pool="people"),
            _c("country", "cat", "country", "countries", pool="country"), _c("birth_year", "num", "birth year",
                                                                              lo=1900, hi=1990)]),
        Tab("books", "book", "books", [
            _c("book_id", "id", "id"), _c("title", "name", "title", pool="book"),
            _c("genre", "cat", "genre", pool="genre"), _c("pages", "num", "page count", lo=80, hi=900),
            _c("author_id", "fk", "author", pool="authors")]),
        Tab("members", "member", "members", [
            _c("member_id", "id", "id"), _c("name", "name", "name", pool="people"),
            _c("city", "cat", "city", "cities", pool="city"), _c("age", "num", "age", lo=10, hi=90)]),
        Tab("loans", "loan", "loans", [
            _c("loan_id", "id", "id"), _c("member_id", "fk", "member", pool="members"),
            _c("status", "cat", "status", "statuses", pool="status"),
            _c("days", "num", "duration in days", "durations in days", lo=1, hi=60)]),
    ],
    "clinic": [
        Tab("doctors", "doctor", "doctors", [
            _c("doctor_id", "id", "id"), _c("name", "name", "name", pool="people"),
            _c("specialty", "cat", "specialty", "specialties", pool="specialty"),
            _c("salary", "num", "salary", "salaries", lo=60, hi=300)]),
        Tab("patients", "patient", "patients", [
            _c("patient_id", "id", "id"), _c("name", "name", "name", pool="people"),
            _c("city", "cat", "city", "cities", pool="city"), _c("age", "num", "age", lo=1, hi=95)]),
        Tab("visits", "visit", "visits", [
            _c("visit_id", "id", "id"), _c("patient_id", "fk", "patient", pool="patients"),
            _c("diagnosis", "cat", "diagnosis", "diagnoses", pool="diagnosis"),
            _c("fee", "num", "fee", lo=20, hi=400)]),
    ],
}


# ----------------------------------------------------------------------------- databases

def make_data(rng: random.Random, tables: list[Tab]) -> dict[str, list[tuple]]:
    data: dict[str, list[tuple]] = {}
    for t in tables:  # referenced tables come first in DOMAINS
        n = rng.randint(6, 10)
        names = {c.name: rng.sample(POOLS[c.pool], min(n, len(POOLS[c.pool]))) for c in t.of("name")}
        rows = []
        for i in range(n):
            row = []
            for c in t.cols:
                if c.kind == "id":
                    row.append(i + 1)
                elif c.kind == "name":
                    pool = names[c.name]
                    row.append(pool[i % len(pool)])
                elif c.kind == "cat":
                    row.append(rng.choice(POOLS[c.pool]))
                elif c.kind == "num":
                    row.append(rng.randint(c.lo, c.hi))
                else:
                    row.append(rng.randint(1, len(data[c.pool])))
            rows.append(tuple(row))
        data[t.name] = rows
    return data


def pg_ddl(tables: list[Tab]) -> str:
    return "\n".join(f"CREATE TABLE {t.name} (" + ", ".join(f"{c.name} {c.pg_type}" for c in t.cols) + ");"
                     for t in tables)


def write_sqlite(path: Path, tables: list[Tab], data: dict[str, list[tuple]]) -> None:
    """Written beside and renamed into place, so a reader never sees half a database."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    conn = sqlite3.connect(tmp)
    for t in tables:
        conn.execute(f"CREATE TABLE {quote_ident(t.name)} (" + ", ".join(
            f"{quote_ident(c.name)} {sqlite_type(c.pg_type)}" + (" PRIMARY KEY" if c.kind == "id" else "")
            for c in t.cols) + ")")
        conn.executemany(f"INSERT INTO {quote_ident(t.name)} VALUES ({', '.join('?' * len(t.cols))})", data[t.name])
    conn.commit()
    conn.close()
    os.replace(tmp, path)


# ----------------------------------------------------------------------------- roles

def make_policy(rng: random.Random, db_id: str, tables: list[Tab]) -> str:
    """Spider-AC's shape: USAGE on the schema for every role, then SELECT grants. User_1 reads everything
    (some tables by a whole-table grant), User_2 whole tables but not all of them, User_3 every table but
    only some columns, User_4 a few columns of one or two tables."""
    lines = []

    def grant(role, table, cols=None):
        target = f"{db_id}.{table.name} TO {db_id}_{role};"
        lines.append(f"GRANT SELECT ON {target}" if cols is None else
                     f"GRANT SELECT ({', '.join(c.name for c in cols)}) ON {target}")

    for role in ROLES:
        lines.append(f"GRANT USAGE ON SCHEMA {db_id} TO {db_id}_{role};")
        if role == "User_1":
            for t in tables:
                grant(role, t, None if rng.random() < 0.5 else t.cols)
        elif role == "User_2":
            for t in rng.sample(tables, rng.randint(1, len(tables) - 1)):
                grant(role, t, t.cols)
        elif role == "User_3":
            for t in tables:
                rest = t.cols[1:]
                keep = rng.sample(rest, rng.randint(1, len(rest) - 1))
                grant(role, t, [c for c in t.cols if c is t.cols[0] or c in keep])
        else:
            for t in rng.sample(tables, rng.randint(1, 2)):
                grant(role, t, [t.cols[0], rng.choice(t.cols[1:])])
    return "\n".join(lines)


# ----------------------------------------------------------------------------- questions

def _a(word: str) -> str:
    return ("an " if word[0] in "aeiou" else "a ") + word


def make_question(rng: random.Random, tables: list[Tab], data: dict[str, list[tuple]]) -> tuple[str, str]:
    """(question, gold SQL) from one of the templates."""
    t = rng.choice(tables)
    rows = data[t.name]
    idx = {c.name: i for i, c in enumerate(t.cols)}
    shown = t.of("name", "cat", "num")
    nums, cats = t.of("num"), t.of("cat")
    col = rng.choice(shown)
    kinds = ["list", "list2", "count", "agg", "where_num", "order", "top"]
    if cats:
        kinds += ["where_cat", "count_cat", "group"]
    fks = [c for c in t.of("fk") if next(x for x in tables if x.name == c.pool).of("cat")]
    if fks:
        kinds += ["join"]
    kind = rng.choice(kinds)
    if kind == "list":
        return f"What are the {col.plural} of all {t.plural}?", f"SELECT {col.name} FROM {t.name}"
    if kind == "list2":
        a, b = rng.sample(shown, 2)
        return f"List the {a.sing} and {b.sing} of every {t.sing}.", f"SELECT {a.name}, {b.name} FROM {t.name}"
    if kind == "count":
        return f"How many {t.plural} are there?", f"SELECT count(*) FROM {t.name}"
    if kind == "agg":
        num = rng.choice(nums)
        word, fn = rng.choice([("average", "avg"), ("highest", "max"), ("lowest", "min"), ("total", "sum")])
        return f"What is the {word} {num.sing} of all {t.plural}?", f"SELECT {fn}({num.name}) FROM {t.name}"
    if kind == "where_num":
        num = rng.choice(nums)
        cut = rng.choice(rows)[idx[num.name]]
        out = rng.choice([c for c in shown if c is not num])
        return (f"What are the {out.plural} of {t.plural} with {_a(num.sing)} above {cut}?",
                f"SELECT {out.name} FROM {t.name} WHERE {num.name} > {cut}")
    if kind == "order":
        num = rng.choice(nums)
        out = rng.choice([c for c in shown if c is not num])
        desc = rng.random() < 0.5
        return (f"List the {out.plural} of all {t.plural} from the {'highest' if desc else 'lowest'} "
                f"{num.sing} to the {'lowest' if desc else 'highest'}.",
                f"SELECT {out.name} FROM {t.name} ORDER BY {num.name}{' DESC' if desc else ''}")
    if kind == "top":
        num = rng.choice(nums)
        out = rng.choice([c for c in shown if c is not num])
        return (f"What is the {out.sing} of the {t.sing} with the highest {num.sing}?",
                f"SELECT {out.name} FROM {t.name} ORDER BY {num.name} DESC LIMIT 1")
    if kind == "where_cat":
        cat = rng.choice(cats)
        value = rng.choice(rows)[idx[cat.name]]
        out = rng.choice([c for c in shown if c is not cat])
        return (f"What are the {out.plural} of {t.plural} whose {cat.sing} is {value}?",
                f"SELECT {out.name} FROM {t.name} WHERE {cat.name} = '{value}'")
    if kind == "count_cat":
        cat = rng.choice(cats)
        value = rng.choice(rows)[idx[cat.name]]
        return (f"How many {t.plural} have the {cat.sing} {value}?",
                f"SELECT count(*) FROM {t.name} WHERE {cat.name} = '{value}'")
    if kind == "group":
        cat = rng.choice(cats)
        return (f"How many {t.plural} are there for each {cat.sing}?",
                f"SELECT {cat.name}, count(*) FROM {t.name} GROUP BY {cat.name}")
    fk = rng.choice(fks)
    ref = next(x for x in tables if x.name == fk.pool)
    rcat = rng.choice(ref.of("cat"))
    # a value some row of t links to, so that the answer is not empty
    ref_row = data[ref.name][rng.choice(rows)[idx[fk.name]] - 1]
    value = ref_row[[c.name for c in ref.cols].index(rcat.name)]
    out = rng.choice(t.of("name", "num", "cat"))
    return (f"What are the {out.plural} of {t.plural} whose {fk.sing} has the {rcat.sing} {value}?",
            f"SELECT T1.{out.name} FROM {t.name} AS T1 JOIN {ref.name} AS T2 ON T1.{fk.name} = T2.{ref.cols[0].name} "
            f"WHERE T2.{rcat.name} = '{value}'")


# ----------------------------------------------------------------------------- the data set

@dataclass
class GenDb:
    db_id: str
    tables: list[Tab]
    data: dict
    policy: str
    ddl: str


def make_databases(seed: int, out: Path) -> list[GenDb]:
    dbs = []
    for db_id, tables in DOMAINS.items():
        rng = random.Random(f"{seed}:{db_id}")
        data = make_data(rng, tables)
        db = GenDb(db_id, tables, data, make_policy(rng, db_id, tables), pg_ddl(tables))
        write_sqlite(out / "database" / db_id / f"{db_id}.sqlite", tables, data)
        dbs.append(db)
    return dbs


def write_dataset(out_dir, *, seed: int, sizes: dict[str, int]) -> None:
    """One JSONL per split in Spider-AC's format, plus the databases; the same seed gives the same files."""
    out = Path(out_dir)
    dbs = make_databases(seed, out)
    rng = random.Random(seed)
    opened = {d.db_id: open_database(d.db_id, d.ddl, out) for d in dbs}
    policies = {d.db_id: parse_policy(d.policy, d.db_id) for d in dbs}
    seen: set[tuple[str, str, str]] = set()
    for split, size in sizes.items():
        rows = []
        while len(rows) < size:
            for _attempt in range(50):  # a question and role not used yet, in any split
                db = rng.choice(dbs)
                question, sql = make_question(rng, db.tables, db.data)
                outcomes = {}
                for role in ROLES:
                    outcomes[role] = outcome(opened[db.db_id], grants_for(policies[db.db_id], role), sql)
                    if outcomes[role][0] == "error":
                        raise RuntimeError(f"generated SQL does not run: {sql!r}: {outcomes[role][1]}")
                want = "permit" if rng.random() < 0.5 else "deny"
                roles = [r for r in ROLES if outcomes[r][0] == want] or list(ROLES)
                role = rng.choice(roles)
                if (db.db_id, role, question) not in seen:
                    break
            seen.add((db.db_id, role, question))
            kind, message, result = outcomes[role]
            label = label_rows(result.rows) if kind == "permit" else error_label(message)
            rows.append({"db_id": db.db_id, "user": role, "query": sql, "question": question,
                         "ground_truth_label": label, "access_policy_sql": db.policy, "schema_ddl": db.ddl,
                         "decision": "PERMIT" if kind == "permit" else "DENY"})
        write_jsonl(out / f"{split}.jsonl", rows)
