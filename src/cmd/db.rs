//! `nicbench db backup FILE`: a consistent copy of the results database,
//! taken read-only (it works on a database this user may only read).

use crate::cli::store::{DbAction, DbCommandArgs};

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
    }
}
