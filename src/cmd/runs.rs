//! `nicbench runs` and `nicbench show`: the run history and one saved run.

use anyhow::Context;

use super::save::database_path;
use super::stdout::write_out;
use crate::cli::store::{DbArgs, FilterArgs, RunsArgs, ShowArgs};
use crate::model::RunResult;
use crate::outside_text::{terminal, terminal_text};
use crate::report::text::Text;
use crate::report::Reporter;
use crate::store::query::Filter;
use crate::store::{now_unix_seconds, Store, StoreError};

/// Opens the database a reading command names, read-only: a database
/// this user may not write (0444, another user's) can still be read. A
/// database that does not exist yet is not created: there is nothing in it
/// to read.
pub fn open(db: &DbArgs) -> anyhow::Result<Store> {
    Ok(Store::open_read_only(&existing(db)?)?)
}

/// Opens the database a command that changes saved runs (`rm`) names; as
/// [`open`], it must exist.
pub fn open_writable(db: &DbArgs) -> anyhow::Result<Store> {
    Ok(Store::open(&existing(db)?)?)
}

fn existing(db: &DbArgs) -> anyhow::Result<std::path::PathBuf> {
    let path = database_path(&db.db);
    if !crate::store::exists(&path) {
        return Err(StoreError::NothingMatched(format!(
            "no results database at {}: measuring commands create it (or give --db PATH)",
            path.display()
        ))
        .into());
    }
    Ok(path)
}

/// The store filter the options ask for.
pub fn filter(f: &FilterArgs) -> Filter {
    Filter {
        tags: f.tags.clone(),
        workload: f.workload.clone(),
        host: f.host.clone(),
        since_unix_seconds: f.since.map(|age| now_unix_seconds() - age),
        complete_only: false,
        limit: None,
    }
}

/// The error for filters that matched nothing, naming them.
pub fn nothing_matched(store: &Store, f: &FilterArgs) -> anyhow::Error {
    let mut given: Vec<String> = f.tags.iter().map(|t| format!("--tag {t}")).collect();
    given.extend(f.workload.iter().map(|w| format!("--workload {w}")));
    given.extend(f.host.iter().map(|h| format!("--host {h}")));
    given.extend(f.since.iter().map(|s| format!("--since {}s", *s as u64)));
    let message = if given.is_empty() {
        format!("the database {} holds no runs yet", store.path().display())
    } else {
        format!(
            "no run in {} matches {}: `{}` without filters lists every run",
            store.path().display(),
            given.join(" "),
            crate::store::given(store.path()).command(&["runs"])
        )
    };
    StoreError::NothingMatched(message).into()
}

pub fn runs(args: RunsArgs) -> anyhow::Result<()> {
    let store = open(&args.db)?;
    let mut f = filter(&args.filter);
    f.limit = Some(args.limit);
    let mut runs = store.runs(&f)?;
    if runs.is_empty() {
        return Err(nothing_matched(&store, &args.filter));
    }
    let reread = crate::report::runs::reread_headlines(&store, &mut runs)?;
    write_out(|out| crate::report::runs::render(&runs, &reread, out))
}

pub fn show(args: ShowArgs) -> anyhow::Result<()> {
    let store = open(&args.db)?;
    let run = store.run(args.id)?;
    if args.json {
        return write_out(|out| {
            crate::outside_text::write_json_pretty(&mut *out, &run.document)?;
            writeln!(out)
        });
    }
    let s = &run.summary;
    write_out(|out| {
        if !s.complete {
            writeln!(out, "run {}: {}", s.id, crate::report::runs::state(s))?;
        }
        // Whole here: `runs` cuts a long tag short.
        if !s.tags.is_empty() {
            let tags: Vec<String> = s.tags.iter().map(|t| t.to_string()).collect();
            writeln!(out, "tags: {}", terminal(&tags.join(" ")))?;
        }
        // Saved as it was printed; one saved before the text was made
        // safe may still hold a peer's control characters.
        if let Some(text) = &run.text_report {
            return out.write_all(terminal_text(text).as_bytes());
        }
        if let Ok(result) = <RunResult as serde::Deserialize>::deserialize(&run.document) {
            return Text.render(&result, out);
        }
        // An imported run: what its columns hold.
        writeln!(out, "run {} (imported): {}", s.id, terminal(&run.command_line))?;
        writeln!(out, "workload: {}", terminal(&s.workload))?;
        writeln!(out, "hosts: {}", terminal(&crate::report::runs::hosts(s)))?;
        if let (Some(v), Some(unit)) = (s.headline_value, &s.headline_unit) {
            writeln!(out, "result: {}", terminal(&crate::report::runs::figure(v, unit)))?;
        }
        Ok(())
    })
    .with_context(|| format!("showing run {}", args.id))
}
