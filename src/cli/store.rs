//! Options of the results store: saving (shared by every measuring command
//! and the demo) and the commands that read it (`runs`, `show`, `compare`,
//! `diff`, `export`, `rm`, `import`, `db backup`).

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

use crate::store::Tag;

/// Where runs are saved, and with which tags.
#[derive(Debug, Clone, Default, Args)]
pub struct SaveArgs {
    /// Results database (default: $XDG_DATA_HOME/nicbench/results.db, i.e.
    /// ~/.local/share/nicbench/results.db).
    #[arg(long, value_name = "PATH", env = "NICBENCH_DB")]
    pub db: Option<PathBuf>,
    /// Do not save this run in the results database.
    #[arg(long)]
    pub no_save: bool,
    /// Tag the saved run, KEY=VALUE (repeatable): --tag nic=pro1000mt --tag mtu=9000.
    #[arg(long = "tag", value_name = "KEY=VALUE", value_parser = tag)]
    pub tags: Vec<Tag>,
}

/// The database a reading command opens.
#[derive(Debug, Clone, Default, Args)]
pub struct DbArgs {
    /// Results database (default: $XDG_DATA_HOME/nicbench/results.db).
    #[arg(long, value_name = "PATH", env = "NICBENCH_DB")]
    pub db: Option<PathBuf>,
}

pub fn tag(s: &str) -> Result<Tag, String> {
    s.parse()
}

/// Which runs: every filter given must match.
#[derive(Debug, Clone, Default, Args)]
pub struct FilterArgs {
    /// Only runs with this tag (repeatable; all must match).
    #[arg(long = "tag", value_name = "KEY=VALUE", value_parser = tag)]
    pub tags: Vec<Tag>,
    #[arg(long, value_name = "W", help = super::workload_filter_help())]
    pub workload: Option<String>,
    /// Only runs whose client or agent host name, or agent address, is H.
    #[arg(long, value_name = "H")]
    pub host: Option<String>,
    /// Only runs started within this long before now (30m, 12h, 7d, 2w).
    #[arg(long, value_name = "AGE", value_parser = age)]
    pub since: Option<f64>,
}

/// `30m`, `12h`, `7d`, `2w` in seconds.
pub fn age(s: &str) -> Result<f64, String> {
    let bad = || format!("invalid age '{s}': expected a number and s, m, h, d or w, e.g. 7d");
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).ok_or_else(bad)?;
    let number: f64 = s[..split].parse().map_err(|_| bad())?;
    let unit = match &s[split..] {
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        "w" => 7.0 * 86400.0,
        _ => return Err(bad()),
    };
    let seconds = number * unit;
    if seconds > crate::units::MAX_DURATION_SECONDS {
        return Err(format!(
            "invalid age '{s}': {seconds:.1e} s is more than the longest age, {:.0e} s (about 31 years)",
            crate::units::MAX_DURATION_SECONDS
        ));
    }
    Ok(seconds)
}

/// `nicbench runs`
#[derive(Debug, Args)]
pub struct RunsArgs {
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// At most this many runs, newest first.
    #[arg(long, value_name = "N", default_value_t = 50,
          value_parser = crate::workload::args::parse::between::<u64>(1, i64::MAX as u64))]
    pub limit: u64,
}

/// `nicbench show`
#[derive(Debug, Args)]
pub struct ShowArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// Run id (from `nicbench runs`).
    pub id: i64,
    /// Print the saved result document instead of the text report.
    #[arg(long)]
    pub json: bool,
}

/// Output format of a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TableFormat {
    Text,
    Markdown,
    Csv,
    Json,
}

/// What a cell of several trials or runs reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Stat {
    /// The best trial (highest throughput, lowest latency, loss or CPU).
    Best,
    /// The worst trial.
    Worst,
    /// The median of the runs' reported figures.
    Median,
    /// The mean of the runs' reported figures.
    Mean,
}

/// `nicbench compare`
#[derive(Debug, Args)]
pub struct CompareArgs {
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// What makes a row: the run's case (what its configuration is), columns
    /// or tags, comma-separated (e.g. case, workload,mtu or tag:test).
    #[arg(long, value_name = "KEYS", default_value = "case", value_delimiter = ',')]
    pub rows: Vec<String>,
    /// What makes a column (e.g. tag:nic).
    #[arg(long, value_name = "KEYS", default_value = "", value_delimiter = ',')]
    pub cols: Vec<String>,
    /// The figures in each cell, comma-separated. The help's list of
    /// metrics is generated from the workloads' and the store's own
    /// (`cli::metric_help`), so this comment names none.
    #[arg(long, value_name = "METRICS", default_value = "throughput", value_delimiter = ',')]
    pub metric: Vec<String>,
    /// How a cell sums up its runs: the best or worst of its trials, the
    /// median or mean of its runs.
    #[arg(long, value_enum, default_value_t = Stat::Median)]
    pub stat: Stat,
    /// Add each cell's ratio to this column's cell of the same row.
    #[arg(long, value_name = "COLUMN")]
    pub baseline: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = TableFormat::Text)]
    pub format: TableFormat,
}

/// `nicbench diff`
#[derive(Debug, Args)]
pub struct DiffArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// The earlier run.
    pub first: i64,
    /// The run compared with it.
    pub second: i64,
}

/// Format of `nicbench export`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    Json,
    Csv,
}

/// `nicbench export`
#[derive(Debug, Args)]
pub struct ExportArgs {
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// json: every run with its whole document; csv: one line per run with its columns.
    #[arg(long, value_enum, default_value_t = ExportFormat::Json)]
    pub format: ExportFormat,
}

/// `nicbench rm`
#[derive(Debug, Args)]
pub struct RmArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// Run ids to remove.
    #[arg(value_name = "ID", required_unless_present = "tags", conflicts_with = "tags")]
    pub ids: Vec<i64>,
    /// Remove every run with this tag (repeatable; all must match).
    #[arg(long = "tag", value_name = "KEY=VALUE", value_parser = tag)]
    pub tags: Vec<Tag>,
    /// Do not ask for confirmation.
    #[arg(long, short)]
    pub yes: bool,
}

/// `nicbench import`
#[derive(Debug, Args)]
pub struct ImportArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// iperf3 -J documents, NetPIPE output files (np.out), nicbench JSON documents.
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// Tag every imported run, KEY=VALUE (repeatable).
    #[arg(long = "tag", value_name = "KEY=VALUE", value_parser = tag)]
    pub tags: Vec<Tag>,
}

/// `nicbench db`
#[derive(Debug, Args)]
pub struct DbCommandArgs {
    #[command(subcommand)]
    pub action: DbAction,
}

/// What `nicbench db` does to the database itself.
#[derive(Debug, Subcommand)]
pub enum DbAction {
    /// Copy the database into FILE, consistent even while other processes
    /// save into it (SQLite's online backup): one self-contained file.
    Backup(BackupArgs),
    /// Copy the runs of the database (--db, a local SQLite file) into a
    /// team's archive, `postgres://user@host/dbname`: each run once (a run
    /// already there, by its document's SHA-256, is skipped), so a push cut
    /// short is resumed by pushing again. The password comes from
    /// PGPASSWORD or ~/.pgpass, never from the URL. TLS as libpq's sslmode:
    /// `?sslmode=verify-full&sslrootcert=ca.crt` checks the server's
    /// certificate and name, `require` only encrypts, `disable` never.
    Push(CopyArgs),
    /// Copy the runs of an archive (`postgres://...`) that match the filters
    /// into the database (--db), each run once, as `db push` the other way.
    Pull(CopyArgs),
}

/// `nicbench db push` and `db pull`
#[derive(Debug, Args)]
pub struct CopyArgs {
    /// The other database: `postgres://user@host/dbname` (or a file);
    /// `?sslmode=disable|prefer|require|verify-ca|verify-full` and
    /// `&sslrootcert=FILE|system` as libpq's.
    #[arg(value_name = "URL")]
    pub other: PathBuf,
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub filter: FilterArgs,
}

/// `nicbench db backup`
#[derive(Debug, Args)]
pub struct BackupArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// The copy to write; it must not exist.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_take_days_and_weeks() {
        assert_eq!(age("7d").unwrap(), 604800.0);
        assert_eq!(age("1.5h").unwrap(), 5400.0);
        assert!(age("7").unwrap_err().contains("expected a number and s, m, h, d or w"));
        assert!(age("d").is_err());
    }
}
