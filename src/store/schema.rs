//! The database schema and its migrations. `PRAGMA user_version` holds the
//! schema version; `MIGRATIONS[i]` brings a database from version `i` to
//! `i + 1`. Migrations are only ever appended: a released one never changes,
//! so an older database is upgraded in place by running the missing ones,
//! and a newer database (a version past `MIGRATIONS.len()`) is refused.

/// `PRAGMA application_id` of a nicbench database ("nicb").
pub const APPLICATION_ID: i64 = 0x6e69_6362;

/// Version 1, the first schema: runs, their trials and tags.
const V1: &str = "
CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
    started_at_unix_seconds REAL NOT NULL,
    saved_at_unix_seconds REAL NOT NULL,
    command_line TEXT NOT NULL,
    nicbench_version TEXT NOT NULL,
    agent_address TEXT,
    client_host TEXT,
    agent_host TEXT,
    workload TEXT NOT NULL,
    direction TEXT,
    streams INTEGER,
    message_bytes INTEGER,
    client_mtu_bytes INTEGER,
    agent_mtu_bytes INTEGER,
    link_speed_bits_per_second REAL,
    receiver_bits_per_second REAL,
    sender_bits_per_second REAL,
    loss_percent REAL,
    p50_latency_us REAL,
    p99_latency_us REAL,
    transactions_per_second REAL,
    sweep_peak_bits_per_second REAL,
    client_cpu_percent REAL,
    agent_cpu_percent REAL,
    client_service_demand_us_per_kb REAL,
    agent_service_demand_us_per_kb REAL,
    verdict_kind TEXT,
    headline_metric TEXT,
    headline_unit TEXT,
    headline_value REAL,
    trials_planned INTEGER,
    trials_saved INTEGER NOT NULL DEFAULT 0,
    complete INTEGER NOT NULL DEFAULT 0,
    document TEXT NOT NULL,
    text_report TEXT
);
CREATE TABLE trials (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    trial INTEGER NOT NULL,
    saved_at_unix_seconds REAL NOT NULL,
    headline_value REAL,
    document TEXT NOT NULL,
    PRIMARY KEY (run_id, trial)
);
CREATE TABLE tags (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (run_id, key)
);
CREATE INDEX runs_started ON runs(started_at_unix_seconds);
CREATE INDEX tags_key_value ON tags(key, value);
";

/// Version 2: where a run came from (`nicbench` for a run measured here;
/// `iperf3`, `netpipe`, `nicbench-json` for imports) and the imported file.
const V2: &str = "
ALTER TABLE runs ADD COLUMN source TEXT NOT NULL DEFAULT 'nicbench';
ALTER TABLE runs ADD COLUMN source_file TEXT;
CREATE INDEX runs_workload ON runs(workload);
";

/// Version 3: the CPU split of both ends (user, system, softirq, irq
/// percent of all cores, as in the document's `cpu.client`/`cpu.agent`), so
/// the CPU chart reads columns instead of parsing every document. Existing
/// rows are filled from their documents; a document that is not JSON, or
/// that does not carry a part as a number (imports of other tools), leaves
/// it NULL, as a new save would.
const V3: &str = "
ALTER TABLE runs ADD COLUMN client_cpu_user_percent REAL;
ALTER TABLE runs ADD COLUMN client_cpu_system_percent REAL;
ALTER TABLE runs ADD COLUMN client_cpu_softirq_percent REAL;
ALTER TABLE runs ADD COLUMN client_cpu_irq_percent REAL;
ALTER TABLE runs ADD COLUMN agent_cpu_user_percent REAL;
ALTER TABLE runs ADD COLUMN agent_cpu_system_percent REAL;
ALTER TABLE runs ADD COLUMN agent_cpu_softirq_percent REAL;
ALTER TABLE runs ADD COLUMN agent_cpu_irq_percent REAL;
UPDATE runs SET
    client_cpu_user_percent = CASE WHEN json_type(document, '$.cpu.client.user_percent') IN ('integer', 'real')
        THEN json_extract(document, '$.cpu.client.user_percent') END,
    client_cpu_system_percent = CASE WHEN json_type(document, '$.cpu.client.system_percent') IN ('integer', 'real')
        THEN json_extract(document, '$.cpu.client.system_percent') END,
    client_cpu_softirq_percent = CASE WHEN json_type(document, '$.cpu.client.softirq_percent') IN ('integer', 'real')
        THEN json_extract(document, '$.cpu.client.softirq_percent') END,
    client_cpu_irq_percent = CASE WHEN json_type(document, '$.cpu.client.irq_percent') IN ('integer', 'real')
        THEN json_extract(document, '$.cpu.client.irq_percent') END,
    agent_cpu_user_percent = CASE WHEN json_type(document, '$.cpu.agent.user_percent') IN ('integer', 'real')
        THEN json_extract(document, '$.cpu.agent.user_percent') END,
    agent_cpu_system_percent = CASE WHEN json_type(document, '$.cpu.agent.system_percent') IN ('integer', 'real')
        THEN json_extract(document, '$.cpu.agent.system_percent') END,
    agent_cpu_softirq_percent = CASE WHEN json_type(document, '$.cpu.agent.softirq_percent') IN ('integer', 'real')
        THEN json_extract(document, '$.cpu.agent.softirq_percent') END,
    agent_cpu_irq_percent = CASE WHEN json_type(document, '$.cpu.agent.irq_percent') IN ('integer', 'real')
        THEN json_extract(document, '$.cpu.agent.irq_percent') END
WHERE json_valid(document);
";

/// Version 4: a `files` run is headed by what its command reports, the
/// payload's rate (`sum.files.payload_bits_per_second`), not the
/// receiver's wire rate that earlier versions stored; the run and each of
/// its trials. A run or trial whose document does not carry the payload
/// rate as a number keeps what it had. (A migration records what one
/// version stored, so it names the workload; the files workload declares
/// the same figure as its headline.)
const V4: &str = "
UPDATE runs SET
    headline_metric = 'payload_bits_per_second',
    headline_unit = 'bit/s',
    headline_value = json_extract(document, '$.sum.files.payload_bits_per_second')
WHERE workload = 'files' AND json_valid(document)
    AND json_type(document, '$.sum.files.payload_bits_per_second') IN ('integer', 'real');
UPDATE trials SET
    headline_value = json_extract(document, '$.sum.files.payload_bits_per_second')
WHERE run_id IN (SELECT id FROM runs WHERE workload = 'files') AND json_valid(document)
    AND json_type(document, '$.sum.files.payload_bits_per_second') IN ('integer', 'real');
";

/// Version 5: the plan runs, each with what it measures (`identity`, the
/// plan's canonical description as JSON, and its `fingerprint`, a hash of
/// it), so that `nicbench run` resumes only a plan run of the same plan and
/// says what changed otherwise. The seed is text: a `--seed` is any u64.
/// Plan runs of older versions have no row (their runs carry only tags).
const V5: &str = "
CREATE TABLE plan_runs (
    plan_run TEXT PRIMARY KEY,
    plan TEXT NOT NULL,
    started_at_unix_seconds REAL NOT NULL,
    seed TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    identity TEXT NOT NULL
);
CREATE INDEX plan_runs_plan ON plan_runs(plan, started_at_unix_seconds);
";

/// Version 6: each run's digest (`store::digest`), the few parts of its
/// document that listings and reports read by path, so that they need not
/// parse whole documents. A table of its own: a column of `runs` would sit
/// after the document, and SQLite reaches it by walking the document's
/// overflow pages. Filled from the documents in the migration's
/// transaction by [`crate::store::digest::fill`] (see [`fills_digests`]).
pub const DIGESTS: &str = "
CREATE TABLE digests (
    run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
    digest TEXT NOT NULL
);
";

/// Version 7: the runs `db push` and `db pull` copied in, by the SHA-256
/// of their document (`store::copy`), so that a run copied twice, or by
/// two pushers at once, is stored once, and a cut push resumes.
const COPIED: &str = "
CREATE TABLE copied_runs (
    document_sha256 TEXT PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE
);
";

/// Version 8: the tag filter's index holds the run, so that the runs of a
/// tag (`--tag src=host-17`) are read from the index alone, on both back
/// ends, instead of by a probe of every run's tags (a full pass over
/// `runs`, slow past 100k runs) or a lookup of each index entry's row.
const TAG_RUNS: &str = "
CREATE INDEX tags_key_value_run ON tags(key, value, run_id);
DROP INDEX tags_key_value;
";

/// Every migration, in order. Never edit a released one: append.
pub const MIGRATIONS: &[&str] = &[V1, V2, V3, V4, V5, DIGESTS, COPIED, TAG_RUNS];

/// Whether migration `sql` is the one after which every run's digest is
/// made from its document (wherever it sits in [`MIGRATIONS`]).
pub fn fills_digests(sql: &str) -> bool {
    sql == DIGESTS
}

/// The schema version this build writes.
pub const CURRENT_VERSION: i64 = MIGRATIONS.len() as i64;
