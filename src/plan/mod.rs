//! Plans: what users write and `nicbench run` executes — a test matrix
//! from a TOML file, run unattended as one case after another, resumable
//! from the results store, with comparison tables at the end.

pub mod exec;
pub mod file;
pub mod host;
pub mod identity;
pub mod lab_axis;
pub mod matrix;
pub mod queue;
pub mod runner;

use std::path::{Path, PathBuf};

pub use file::{Plan, PlanError};
pub use matrix::{expand, Case};

/// Where plan runs keep their summaries, command output and restore files:
/// beside the results database `db`, or, for a PostgreSQL archive (no
/// directory of its own on this host), beside the default local database.
/// `nicbench run` writes there, and the HTML report and `--restore` read it
/// back.
pub fn plans_dir(db: &Path) -> PathBuf {
    // A URL's "parent" would be a relative directory named `postgres:` in
    // whatever directory the command ran from.
    let local = match crate::store::postgres::is_url(db) {
        true => crate::store::default_path(),
        false => db.to_path_buf(),
    };
    local.parent().unwrap_or(Path::new(".")).join("plans")
}

/// The longest plan-run id taken (nicbench makes 20: `20261123-201022-d72c`).
pub const MAX_PLAN_RUN_ID_BYTES: usize = 64;

/// Checks a plan-run id before it names anything on disk: it comes from
/// the database (a plan run's record or a run's `plan_run` tag) or from
/// `--resume`, and a database is a file anyone may have written. 1 to
/// [`MAX_PLAN_RUN_ID_BYTES`] of ASCII letters, digits, `-`, `_` and `.`,
/// not starting with `.` and without `..`: one plain name, inside the
/// plans directory. The error says why.
pub fn check_plan_run_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > MAX_PLAN_RUN_ID_BYTES {
        return Err(format!(
            "it is {} bytes long, not 1 to {MAX_PLAN_RUN_ID_BYTES}",
            id.len()
        ));
    }
    if let Some(c) = id.chars().find(|c| !(c.is_ascii_alphanumeric() || "-_.".contains(*c))) {
        return Err(format!(
            "it holds {c:?}; a plan-run id is letters, digits, '-', '_' and '.' (it names a directory)"
        ));
    }
    if id.starts_with('.') || id.contains("..") {
        return Err("it starts with '.' or holds '..', which could lead outside the plans directory".into());
    }
    Ok(())
}

/// The directory of one plan run's summary, command output and restore
/// file: `plans/PLAN-RUN` beside the database. Both names are checked
/// again here, where they become a path.
pub fn plan_run_dir(db: &Path, plan: &str, plan_run: &str) -> Result<PathBuf, String> {
    file::check_name(plan).map_err(|e| format!("plan name {plan:?}: {e}"))?;
    check_plan_run_id(plan_run).map_err(|e| format!("plan run {plan_run:?}: {e}"))?;
    Ok(plans_dir(db).join(format!("{plan}-{plan_run}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 67: a plan-run id `../../../../tmp/x` planted in a database
    /// was resumed and wrote `/tmp/x/summary.json`.
    #[test]
    fn a_postgresql_archives_plans_are_kept_beside_the_default_local_database() {
        let dir = plans_dir(Path::new("postgres://team@db.example/nicbench"));
        assert_eq!(dir, crate::store::default_path().parent().unwrap().join("plans"));
        assert!(!dir.to_string_lossy().contains("postgres:"), "{}", dir.display());
        assert_eq!(plans_dir(Path::new("/data/results.db")), Path::new("/data/plans"));
    }

    #[test]
    fn a_plan_run_id_that_leaves_the_plans_directory_is_refused() {
        for good in ["20261123-201022-d72c", "r1", "a.b_c-D"] {
            check_plan_run_id(good).unwrap();
        }
        let db = Path::new("/data/r.db");
        assert_eq!(
            plan_run_dir(db, "p", "20261123-201022-d72c").unwrap(),
            Path::new("/data/plans/p-20261123-201022-d72c")
        );
        for bad in [
            "../../../../tmp/x",
            "..",
            ".hidden",
            "a/b",
            "a\\b",
            "",
            "x\ny",
            "\u{202e}x",
            &"a".repeat(65),
        ] {
            let why = check_plan_run_id(bad).unwrap_err();
            assert!(plan_run_dir(db, "p", bad).is_err(), "{bad:?}: {why}");
        }
        assert!(check_plan_run_id("../../../../tmp/x").unwrap_err().contains("'/'"));
    }

    /// Every plan in examples/ reads and expands into its cases, the lab
    /// axes of roundup.toml with them: an example that drifted from the
    /// plan grammar fails here, not in a user's hands.
    #[test]
    fn every_example_plan_reads_and_expands() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
        let mut plans = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "toml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let plan = Plan::parse(&text, &path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let cases = expand(&plan).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(!cases.is_empty(), "{}", path.display());
            if path.ends_with("roundup.toml") {
                let cards: std::collections::BTreeSet<&str> = cases
                    .iter()
                    .flat_map(|c| c.lab.iter().map(|(_, v, _)| v.as_str()))
                    .collect();
                assert_eq!(cards.len(), 3, "{cards:?}");
                assert_eq!(cases.len(), 24);
            }
            plans += 1;
        }
        assert!(plans >= 8, "only {plans} example plans");
    }
}
