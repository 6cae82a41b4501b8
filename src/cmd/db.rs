//! `nicbench db backup FILE`: a consistent copy of the results database,
//! taken read-only (it works on a database this user may only read).
//! `nicbench db push URL` / `db pull URL`: runs copied between the local
//! database and a team's archive, each run once (`store::copy`).

use indicatif::{ProgressBar, ProgressStyle};

use crate::cli::store::{CopyArgs, DbAction, DbArgs, DbCommandArgs};
use crate::store::query::Filter;
use crate::store::Store;

pub fn run(args: DbCommandArgs) -> anyhow::Result<()> {
    match args.action {
        DbAction::Backup(backup) => {
            let store = super::runs::open(&backup.db)?;
            let copied = store.backup_to(&backup.file)?;
            super::stdout::print_out(&format!(
                "copied {} ({} runs, {} bytes) to {}\n",
                store.path().display(),
                copied.runs,
                copied.bytes,
                backup.file.display()
            ))
        }
        DbAction::Push(push) => {
            let source = super::runs::open(&push.db)?;
            let target = Store::open(&push.other)?;
            copy(&source, &target, &push, "pushed")
        }
        DbAction::Pull(pull) => {
            let source = super::runs::open(&DbArgs {
                db: Some(pull.other.clone()),
            })?;
            let target = Store::open(&super::save::database_path(&pull.db.db))?;
            copy(&source, &target, &pull, "pulled")
        }
    }
}

/// Copies the runs `args` filter from `source` into `target`, with a
/// progress bar on a terminal, and says what it did.
fn copy(source: &Store, target: &Store, args: &CopyArgs, verb: &str) -> anyhow::Result<()> {
    let filter = Filter {
        limit: None,
        ..super::runs::filter(&args.filter)
    };
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} runs [{elapsed_precise}, {eta} left]")
            .expect("a valid template"),
    );
    let copied = source.copy_runs_into(target, &filter, &mut |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    });
    bar.finish_and_clear();
    let copied = copied?;
    super::stdout::print_out(&format!(
        "{verb} {} runs from {} to {} ({} already there)\n",
        copied.copied,
        source.path().display(),
        target.path().display(),
        copied.present
    ))
}
