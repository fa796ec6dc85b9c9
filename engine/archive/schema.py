"""The archive's schema as an ordered list of migrations; PRAGMA user_version is the schema version."""
from __future__ import annotations

MIGRATIONS: list[str] = [
    # 1: the whole first schema.
    """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
    INSERT INTO meta (key, value) VALUES ('version', 0);

    CREATE TABLE harnesses (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        spec TEXT NOT NULL,              -- the HarnessSpec as JSON
        spec_hash TEXT NOT NULL UNIQUE,  -- the same spec is one harness
        interface TEXT NOT NULL,
        creator TEXT NOT NULL,           -- 'seed', 'editor:offline', 'editor:llm', 'person:<name>'
        rationale TEXT NOT NULL DEFAULT '',
        round INTEGER,
        created_at TEXT NOT NULL
    );
    CREATE TABLE harness_parents (
        child TEXT NOT NULL REFERENCES harnesses(id),
        parent TEXT NOT NULL REFERENCES harnesses(id),
        position INTEGER NOT NULL,
        PRIMARY KEY (child, parent)
    );

    CREATE TABLE datasets (
        id TEXT PRIMARY KEY,
        path TEXT NOT NULL,
        task TEXT NOT NULL,
        harness_id TEXT REFERENCES harnesses(id),
        checkpoint_id TEXT REFERENCES checkpoints(id),
        source TEXT NOT NULL,            -- 'gold' (rendered references) or 'rejection' (own successes)
        tasks_tried INTEGER NOT NULL,
        samples INTEGER NOT NULL,
        kept INTEGER NOT NULL,
        acceptance_rate REAL,
        meta TEXT NOT NULL DEFAULT '{}',
        created_at TEXT NOT NULL
    );

    CREATE TABLE checkpoints (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        path TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('base', 'sft', 'merge')),
        harness_id TEXT REFERENCES harnesses(id),   -- trained under this harness
        dataset_id TEXT REFERENCES datasets(id),    -- on this data
        recipe TEXT NOT NULL DEFAULT '{}',          -- training args or merge recipe
        round INTEGER,
        created_at TEXT NOT NULL
    );
    CREATE TABLE checkpoint_parents (
        child TEXT NOT NULL REFERENCES checkpoints(id),
        parent TEXT NOT NULL REFERENCES checkpoints(id),
        role TEXT NOT NULL,              -- 'init' (sft start), 'model' (merged), 'base' (merge base)
        PRIMARY KEY (child, parent, role)
    );

    CREATE TABLE evaluations (
        id INTEGER PRIMARY KEY,
        harness_id TEXT NOT NULL REFERENCES harnesses(id),
        checkpoint_id TEXT NOT NULL REFERENCES checkpoints(id),
        task TEXT NOT NULL,
        split TEXT NOT NULL,
        score REAL NOT NULL,
        metrics TEXT NOT NULL,           -- task metrics as JSON
        episodes INTEGER NOT NULL,
        turns INTEGER NOT NULL,
        mismatched_turns INTEGER NOT NULL,
        timr REAL NOT NULL,
        tokens INTEGER NOT NULL,
        seconds REAL NOT NULL,
        config TEXT NOT NULL DEFAULT '{}',
        round INTEGER,
        created_at TEXT NOT NULL
    );
    -- the (harness, checkpoint) matrix per task and split is one covering-index scan
    CREATE INDEX evaluations_matrix ON evaluations (task, split, harness_id, checkpoint_id, id, score, timr);
    CREATE INDEX evaluations_checkpoint ON evaluations (checkpoint_id);

    CREATE TABLE episodes (
        evaluation_id INTEGER NOT NULL REFERENCES evaluations(id),
        idx INTEGER NOT NULL,
        item_id TEXT NOT NULL,
        input TEXT NOT NULL DEFAULT '',  -- the task input, for few-shot examples drawn from successes
        sample INTEGER NOT NULL,
        success INTEGER NOT NULL,
        reward REAL NOT NULL,
        turns INTEGER NOT NULL,
        mismatched_turns INTEGER NOT NULL,
        prediction TEXT,
        PRIMARY KEY (evaluation_id, idx)
    ) WITHOUT ROWID;

    CREATE TABLE turns (
        evaluation_id INTEGER NOT NULL REFERENCES evaluations(id),
        episode INTEGER NOT NULL,
        turn INTEGER NOT NULL,
        prompt TEXT NOT NULL,            -- the raw prompt as the model saw it
        output TEXT NOT NULL,            -- the raw output
        action TEXT,                     -- the parsed action as JSON, NULL on a mismatch
        parse_error TEXT,                -- why the turn is a mismatch, NULL otherwise
        mismatch INTEGER NOT NULL,
        feedback TEXT NOT NULL,
        reward REAL NOT NULL,
        tokens INTEGER NOT NULL,
        PRIMARY KEY (evaluation_id, episode, turn)
    ) WITHOUT ROWID;

    CREATE TABLE rounds (
        id INTEGER PRIMARY KEY,
        mode TEXT NOT NULL,
        state TEXT NOT NULL,
        config TEXT NOT NULL DEFAULT '{}',
        created_at TEXT NOT NULL,
        finished_at TEXT
    );
    CREATE TABLE round_steps (
        round_id INTEGER NOT NULL REFERENCES rounds(id),
        step TEXT NOT NULL,
        state TEXT NOT NULL,
        result TEXT NOT NULL DEFAULT '{}',
        finished_at TEXT,
        PRIMARY KEY (round_id, step)
    );

    CREATE TABLE decisions (
        id INTEGER PRIMARY KEY,
        round_id INTEGER REFERENCES rounds(id),
        step TEXT,
        kind TEXT NOT NULL,              -- 'parents', 'inheritance', ...
        candidates TEXT NOT NULL,
        evidence TEXT NOT NULL DEFAULT '{}',
        choice TEXT,
        rationale TEXT NOT NULL DEFAULT '',
        status TEXT NOT NULL CHECK (status IN ('proposed', 'approved', 'overridden', 'auto')),
        decided_by TEXT,
        comment TEXT,
        created_at TEXT NOT NULL,
        decided_at TEXT
    );
    CREATE INDEX decisions_status ON decisions (status);

    CREATE TABLE jobs (
        id INTEGER PRIMARY KEY,
        kind TEXT NOT NULL,
        args TEXT NOT NULL DEFAULT '{}',
        state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed', 'cancelled')),
        progress REAL NOT NULL DEFAULT 0,
        total REAL,
        message TEXT NOT NULL DEFAULT '',
        log_path TEXT,
        pid INTEGER,
        result TEXT,
        error TEXT,
        created_at TEXT NOT NULL,
        started_at TEXT,
        finished_at TEXT
    );
    CREATE INDEX jobs_state ON jobs (state);
    """,
    # 2: one harness's (or checkpoint's) evaluations, and a pair's newest one, without a table scan
    """
    CREATE INDEX evaluations_pair ON evaluations (harness_id, checkpoint_id, task, split, id);
    """,
    # 3: the kinds of an evaluation's mismatched turns; a person's steering acts as decisions
    """
    ALTER TABLE evaluations ADD COLUMN mismatch_kinds TEXT NOT NULL DEFAULT '{}';  -- {kind: turns}

    CREATE TABLE decisions_v3 (
        id INTEGER PRIMARY KEY,
        round_id INTEGER REFERENCES rounds(id),  -- a steering act: the round that applied it (NULL before)
        step TEXT,
        kind TEXT NOT NULL,              -- 'parents', 'inheritance', 'edit'; steering: 'harness', 'pin',
                                         -- 'exclude', 'include', 'pause', 'resume'
        candidates TEXT NOT NULL,
        evidence TEXT NOT NULL DEFAULT '{}',
        choice TEXT,
        rationale TEXT NOT NULL DEFAULT '',
        status TEXT NOT NULL CHECK (status IN ('proposed', 'approved', 'overridden', 'auto', 'steer')),
        decided_by TEXT,
        comment TEXT,
        created_at TEXT NOT NULL,
        decided_at TEXT
    );
    INSERT INTO decisions_v3 SELECT * FROM decisions;
    DROP TABLE decisions;
    ALTER TABLE decisions_v3 RENAME TO decisions;
    CREATE INDEX decisions_status ON decisions (status);
    CREATE INDEX decisions_kind ON decisions (kind, round_id);
    """,
    # 4: a checkpoint of kind 'endpoint': a model served behind an OpenAI-compatible API (no weights; its
    # path is the base URL, its recipe the model name): a baseline, never an SFT or merge parent
    """
    CREATE TABLE checkpoints_v4 (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        path TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('base', 'sft', 'merge', 'endpoint')),
        harness_id TEXT REFERENCES harnesses(id),
        dataset_id TEXT REFERENCES datasets(id),
        recipe TEXT NOT NULL DEFAULT '{}',
        round INTEGER,
        created_at TEXT NOT NULL
    );
    INSERT INTO checkpoints_v4 SELECT * FROM checkpoints;
    DROP TABLE checkpoints;
    ALTER TABLE checkpoints_v4 RENAME TO checkpoints;
    """,
    # 5: the heatmap's cells (a pair's newest evaluation with its n and mismatch kinds) in one covering scan
    """
    CREATE INDEX evaluations_cells ON evaluations
        (task, split, harness_id, checkpoint_id, id, score, timr, episodes, mismatch_kinds);
    DROP INDEX evaluations_matrix;
    """,
    # 6: constrained decoding of calls (a harness's sampling.constrain_calls): how many calls the constraint
    # decoded again in a turn, and in how many of an evaluation's turns it did
    """
    ALTER TABLE turns ADD COLUMN constrained INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE evaluations ADD COLUMN constrained_turns INTEGER NOT NULL DEFAULT 0;
    """,
    # 7: a mended turn keeps what the model wrote before constrained decoding mended it
    """
    ALTER TABLE turns ADD COLUMN free_output TEXT;  -- NULL where the constraint mended nothing
    """,
]

SCHEMA_VERSION = len(MIGRATIONS)
