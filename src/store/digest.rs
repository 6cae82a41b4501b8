//! A run's digest: the few parts of its document that listings, tables,
//! charts and reports pick by path (the spec, the verdict, the line rate,
//! both ends' facts, every workload figure that is not a column), kept at
//! the same places in a small JSON object in the `digests` table. Reading
//! a path of the digest gives what reading it of the document gives, but
//! SQLite parses a few kilobytes instead of the whole document (a rr run's
//! latency histogram, a loaded run's probes: most of a report's time over
//! thousands of runs).
//!
//! A digest names the list of pointers it was made from (its key): a path
//! is read from the digest only when the list holds it and the row's digest
//! has this build's key; else from the document, as before (correct, but
//! slow again: a change of the list wants a migration that calls [`fill`]).

use std::sync::OnceLock;

use serde_json::{Map, Value};

/// The top-level field of a digest holding its key.
const KEY_FIELD: &str = "nicbench_digest";

/// The parts every reader of many runs asks for, besides the workloads'
/// figures.
const FIXED: [&str; 6] = [
    "/spec",
    "/verdict",
    "/line_rate",
    "/client/facts",
    "/agent/facts",
    "/streams/0/sender/sweep/summary",
];

struct Kept {
    pointers: Vec<String>,
    key: String,
}

fn kept() -> &'static Kept {
    static KEPT: OnceLock<Kept> = OnceLock::new();
    KEPT.get_or_init(|| {
        let mut pointers: Vec<String> = FIXED.iter().map(|p| p.to_string()).collect();
        for r in crate::workload::all_results() {
            let listed = r.figures().iter().chain(r.stored_columns()).chain(r.listed_figures());
            pointers.extend(listed.map(|m| m.pointer.to_string()));
            pointers.extend([r.headline().pointer.to_string(), r.mesh_figure().pointer.to_string()]);
        }
        pointers.extend(crate::workload::Metric::BULK.iter().map(|m| m.pointer.to_string()));
        pointers.extend(crate::workload::Metric::THREADS.iter().map(|m| m.pointer.to_string()));
        pointers.sort();
        pointers.dedup();
        // Leave out pointers under another one: the part above holds them.
        let all = pointers.clone();
        pointers.retain(|p| !all.iter().any(|q| q != p && under(p, q)));
        // FNV-1a of the list: a digest made from another list is not read.
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in pointers.join("\n").bytes() {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
        Kept {
            pointers,
            key: format!("{hash:016x}"),
        }
    })
}

/// Whether pointer `p` is `q` or inside it.
fn under(p: &str, q: &str) -> bool {
    p == q || (p.starts_with(q) && p.as_bytes().get(q.len()) == Some(&b'/'))
}

/// The digest of a run document, as JSON text.
pub fn of(doc: &Value) -> String {
    let mut digest = Value::Object(Map::new());
    for pointer in &kept().pointers {
        if let Some(value) = doc.pointer(pointer).filter(|v| !v.is_null()) {
            place(&mut digest, doc, pointer, value.clone());
        }
    }
    digest[KEY_FIELD] = Value::String(kept().key.clone());
    digest.to_string()
}

/// Makes the digest of every run from its document (the migration that
/// adds the column). A document that is not JSON keeps none: its paths
/// are read from the document, as before.
pub(crate) fn fill(tx: &super::db::Db) -> Result<(), super::db::DbError> {
    let ids: Vec<i64> = tx
        .query("SELECT id FROM runs", &[])?
        .iter()
        .map(|r| r.get(0))
        .collect::<Result<_, _>>()?;
    for id in ids {
        let document = tx.query_row("SELECT document FROM runs WHERE id = ?1", super::db::params![id])?;
        let digest = match document.map(|r| r.value(0)) {
            Some(rusqlite::types::Value::Text(text)) => serde_json::from_str::<Value>(&text).ok().map(|d| of(&d)),
            _ => None,
        };
        if let Some(digest) = digest {
            save_digest(tx, id, digest)?;
        }
    }
    Ok(())
}

/// Puts `value` at `pointer` in `digest`, making the objects and arrays
/// on the way as `doc` has them (an array's earlier items as null).
fn place(digest: &mut Value, doc: &Value, pointer: &str, value: Value) {
    let tokens: Vec<String> = pointer
        .split('/')
        .skip(1)
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect();
    let mut here = digest;
    let mut there = doc;
    for (i, token) in tokens.iter().enumerate() {
        let last = i + 1 == tokens.len();
        let next_in_doc = match there {
            Value::Array(items) => token.parse::<usize>().ok().and_then(|n| items.get(n)),
            Value::Object(fields) => fields.get(token),
            _ => None,
        };
        let Some(next_in_doc) = next_in_doc else { return };
        let empty = || match next_in_doc {
            Value::Array(_) => Value::Array(Vec::new()),
            _ => Value::Object(Map::new()),
        };
        here = match (here, there) {
            (Value::Array(items), Value::Array(_)) => {
                let Ok(n) = token.parse::<usize>() else { return };
                if items.len() <= n {
                    items.resize(n + 1, Value::Null);
                }
                if items[n].is_null() {
                    items[n] = empty();
                }
                &mut items[n]
            }
            (Value::Object(fields), _) => fields.entry(token.clone()).or_insert_with(empty),
            _ => return,
        };
        if last {
            *here = value;
            return;
        }
        there = next_in_doc;
    }
}

/// The JSON pointer of a SQLite JSON path (`$.streams[0].sender` is
/// `/streams/0/sender`); None for a path this reader does not know.
fn pointer_of(path: &str) -> Option<String> {
    let mut rest = path.strip_prefix('$')?;
    let mut pointer = String::new();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let name = &r[..end];
            if name.is_empty() || name.contains(['"', '/', '~', '\'']) {
                return None;
            }
            pointer += "/";
            pointer += name;
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let n: usize = r[..end].parse().ok()?;
            pointer += &format!("/{n}");
            rest = &r[end + 1..];
        } else {
            return None;
        }
    }
    Some(pointer)
}

/// Whether every one of these JSON paths is kept in a digest.
pub fn holds(paths: &[&str]) -> bool {
    paths
        .iter()
        .all(|path| pointer_of(path).is_some_and(|p| !p.is_empty() && kept().pointers.iter().any(|q| under(&p, q))))
}

/// The SQL of the JSON to read `paths` from in a row of `runs`: its digest
/// when a digest holds them all and the run's is of this build, else its
/// document (which SQLite then does not read).
pub fn source_of(paths: &[&str]) -> String {
    if holds(paths) {
        format!(
            "coalesce((SELECT d.digest FROM digests d WHERE d.run_id = runs.id \
             AND d.digest ->> '$.{KEY_FIELD}' = '{}'), {})",
            kept().key,
            super::DOCUMENT_SQL
        )
    } else {
        super::DOCUMENT_SQL.into()
    }
}

/// Saves run `id`'s digest of `doc`, replacing the one it had.
pub(crate) fn save(tx: &super::db::Db, id: i64, doc: &Value) -> Result<(), super::db::DbError> {
    save_digest(tx, id, of(doc))
}

/// Writes (or replaces) run `id`'s digest.
fn save_digest(tx: &super::db::Db, id: i64, digest: String) -> Result<(), super::db::DbError> {
    tx.execute(
        "INSERT INTO digests (run_id, digest) VALUES (?1, ?2) \
         ON CONFLICT (run_id) DO UPDATE SET digest = excluded.digest",
        super::db::params![id, digest],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_become_pointers() {
        assert_eq!(pointer_of("$.spec").as_deref(), Some("/spec"));
        assert_eq!(
            pointer_of("$.streams[0].sender.sweep").as_deref(),
            Some("/streams/0/sender/sweep")
        );
        assert_eq!(pointer_of("$").as_deref(), Some(""));
        assert_eq!(pointer_of("$.\"a.b\""), None);
        assert_eq!(pointer_of("spec"), None);
    }

    #[test]
    fn a_digest_keeps_the_kept_parts_at_their_places_and_nothing_else() {
        let doc = json!({
            "schema": "nicbench.run/1", "workload": "sweep",
            "spec": {"streams": 2, "direction": "reverse"},
            "verdict": {"kind": "cpu_starved", "summary": "the client's CPU"},
            "client": {"facts": {"hostname": "a"}, "address": "x"},
            "streams": [{"sender": {"sweep": {"summary": {"peak_line_rate_percent": 42.5}, "points": [1, 2]}}}],
            "intervals": [1, 2, 3],
        });
        let digest: Value = serde_json::from_str(&of(&doc)).unwrap();
        assert_eq!(digest["spec"], doc["spec"]);
        assert_eq!(digest["verdict"], doc["verdict"]);
        assert_eq!(digest["client"], json!({"facts": {"hostname": "a"}}));
        assert_eq!(
            digest["streams"],
            json!([{"sender": {"sweep": {"summary": {"peak_line_rate_percent": 42.5}}}}])
        );
        assert!(digest.get("intervals").is_none() && digest.get("schema").is_none());
        assert!(digest.get("agent").is_none(), "absent parts stay absent: {digest}");
        assert_eq!(digest[KEY_FIELD], kept().key.as_str());
    }

    #[test]
    fn only_kept_paths_are_read_from_a_digest() {
        assert!(holds(&["$.spec", "$.client.facts", "$.verdict.summary"]));
        assert!(holds(&["$.streams[0].sender.sweep.summary.peak_line_rate_percent"]));
        assert!(!holds(&["$.spec", "$.intervals"]));
        assert!(!holds(&["$"]));
        // The document, read as NULL where it is not JSON (issue 67).
        assert_eq!(source_of(&["$.intervals"]), super::super::DOCUMENT_SQL);
        assert!(source_of(&["$.spec"]).ends_with(&format!("{})", super::super::DOCUMENT_SQL)));
        assert!(source_of(&["$.spec"]).contains("FROM digests"));
    }
}
