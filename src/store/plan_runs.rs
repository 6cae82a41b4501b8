//! Plan runs (`nicbench run`): each with what it measures, so that a plan
//! resumes only a plan run of the same plan. The plan module builds the
//! identity; the store keeps it as JSON text with its fingerprint.

use super::db::{params, DbError, Row};
use super::{Store, StoreError};

/// One plan run as recorded when it started (or adopted by `--resume`).
#[derive(Debug, Clone, PartialEq)]
pub struct PlanRunRecord {
    /// `20261123-201022-d72c`, tag `plan_run` of its runs.
    pub plan_run: String,
    /// The plan's name, tag `plan`.
    pub plan: String,
    pub started_at_unix_seconds: f64,
    /// The shuffle's seed.
    pub seed: u64,
    /// A hash of `identity`.
    pub fingerprint: String,
    /// What the plan run measures, as JSON (the plan module's format).
    pub identity: String,
}

impl Store {
    /// Records a plan run, or replaces the record of the same plan run
    /// (`--resume` adopting a plan run with the plan as it is now).
    pub fn record_plan_run(&self, record: &PlanRunRecord) -> Result<(), StoreError> {
        self.db
            .execute(
                "INSERT INTO plan_runs \
                 (plan_run, plan, started_at_unix_seconds, seed, fingerprint, identity) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (plan_run) DO UPDATE SET plan = excluded.plan, \
                 started_at_unix_seconds = excluded.started_at_unix_seconds, seed = excluded.seed, \
                 fingerprint = excluded.fingerprint, identity = excluded.identity",
                params![
                    &record.plan_run,
                    &record.plan,
                    record.started_at_unix_seconds,
                    record.seed.to_string(),
                    &record.fingerprint,
                    &record.identity
                ],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// The recorded plan runs of the plan `plan`, newest first.
    pub fn plan_runs(&self, plan: &str) -> Result<Vec<PlanRunRecord>, StoreError> {
        let rows = self
            .db
            .query(
                "SELECT plan_run, plan, started_at_unix_seconds, seed, fingerprint, identity FROM plan_runs \
                 WHERE plan = ?1 ORDER BY started_at_unix_seconds DESC, plan_run DESC",
                params![plan],
            )
            .and_then(|rows| rows.iter().map(row).collect::<Result<Vec<_>, _>>())
            .map_err(|e| self.err(e))?;
        Ok(rows)
    }

    /// The record of the plan run `plan_run`, of whichever plan.
    pub fn plan_run(&self, plan_run: &str) -> Result<Option<PlanRunRecord>, StoreError> {
        self.db
            .query_row(
                "SELECT plan_run, plan, started_at_unix_seconds, seed, fingerprint, identity FROM plan_runs \
                 WHERE plan_run = ?1",
                params![plan_run],
            )
            .and_then(|found| found.as_ref().map(row).transpose())
            .map_err(|e| self.err(e))
    }
}

fn row(r: &Row) -> Result<PlanRunRecord, DbError> {
    let seed: String = r.get(3)?;
    Ok(PlanRunRecord {
        plan_run: r.get(0)?,
        plan: r.get(1)?,
        started_at_unix_seconds: r.get(2)?,
        // Written by record_plan_run from a u64; anything else is not ours.
        seed: seed.parse().map_err(|e: std::num::ParseIntError| DbError::Decode {
            column: 3,
            detail: format!("a seed that is not a 64-bit number: {e}"),
        })?,
        fingerprint: r.get(4)?,
        identity: r.get(5)?,
    })
}

#[cfg(test)]
mod tests {

    use super::*;

    fn record(plan_run: &str, plan: &str, at: f64) -> PlanRunRecord {
        PlanRunRecord {
            plan_run: plan_run.into(),
            plan: plan.into(),
            started_at_unix_seconds: at,
            seed: u64::MAX,
            fingerprint: format!("f-{plan_run}"),
            identity: "{}".into(),
        }
    }

    crate::store::testing::store_test!(
    fn plan_runs_come_back_newest_first_per_plan_and_a_record_is_replaced_in_place(store) {
        store.record_plan_run(&record("r1", "p", 1.0)).unwrap();
        store.record_plan_run(&record("r2", "p", 2.0)).unwrap();
        store.record_plan_run(&record("q1", "q", 3.0)).unwrap();
        let runs: Vec<String> = store.plan_runs("p").unwrap().into_iter().map(|r| r.plan_run).collect();
        assert_eq!(runs, ["r2", "r1"]);
        let mut adopted = record("r1", "p", 1.0);
        adopted.fingerprint = "new".into();
        store.record_plan_run(&adopted).unwrap();
        assert_eq!(store.plan_run("r1").unwrap(), Some(adopted));
        assert_eq!(store.plan_runs("p").unwrap().len(), 2);
        assert_eq!(store.plan_run("nope").unwrap(), None);
        assert_eq!(store.plan_run("q1").unwrap().unwrap().seed, u64::MAX);
    });
}
