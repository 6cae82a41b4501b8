//! Options of `nicbench plot` (one chart, SVG or PNG) and `nicbench report`
//! (one self-contained HTML file). Both select runs with the filters of
//! `runs` and `compare`.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::parse;
use super::store::{DbArgs, FilterArgs, Stat};

/// `--kind`: every chart kind, each with what it shows in `--help`.
fn chart_kinds() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(
        crate::report::chart::data::kinds()
            .into_iter()
            .map(|(name, help)| clap::builder::PossibleValue::new(name).help(help)),
    )
}

/// The image format of a chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ImageFormat {
    Svg,
    Png,
}

/// `nicbench plot`
#[derive(Debug, Args)]
pub struct PlotArgs {
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Draw these files instead of the database: nicbench --json documents,
    /// iperf3 -J documents, NetPIPE np.out files.
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Only this run (repeatable); with --kind timeline, loaded or loaded-cdf, the run to draw.
    #[arg(long = "id", value_name = "ID")]
    pub ids: Vec<i64>,
    /// What to draw.
    #[arg(long, value_name = "KIND", value_parser = chart_kinds())]
    pub kind: String,
    /// The figure of the bars, drawn for the runs that have it (the help
    /// lists every metric: `plot_metric_help` in cli/mod.rs).
    #[arg(long, value_name = "METRIC", default_value = "throughput")]
    pub metric: String,
    /// What makes a group on the x axis: the run's case, columns or tags, comma-separated (e.g. tag:nic).
    #[arg(long, value_name = "KEYS", default_value = "case", value_delimiter = ',')]
    pub group: Vec<String>,
    /// What colours the bars of a group (e.g. mtu or tag:mtu).
    #[arg(long, value_name = "KEYS", default_value = "", value_delimiter = ',')]
    pub series: Vec<String>,
    /// How several runs of one bar are summed up (the error bar spans them all).
    #[arg(long, value_enum, default_value_t = Stat::Median)]
    pub stat: Stat,
    /// Most lines of a sweep or latency chart (the newest matching runs).
    #[arg(long, value_name = "N", default_value_t = 12, value_parser = parse::between::<usize>(1, 100))]
    pub max_lines: usize,
    /// The image file to write (.svg or .png).
    #[arg(short, long, value_name = "PATH")]
    pub out: PathBuf,
    /// Image format (default: from the --out extension).
    #[arg(long, value_enum)]
    pub format: Option<ImageFormat>,
    /// Width in pixels.
    #[arg(long, value_name = "PX", default_value_t = 900, value_parser = parse::between::<u32>(200, 8000))]
    pub width: u32,
    /// Height in pixels.
    #[arg(long, value_name = "PX", default_value_t = 540, value_parser = parse::between::<u32>(150, 8000))]
    pub height: u32,
    /// Draw the chart laid out at --width x --height this many times as
    /// large, text and lines as sharp as the rest (default: 2 for PNG, a
    /// 1800x1080 image for a slide; 1 for SVG, which scales by itself).
    #[arg(long, value_name = "N", value_parser = parse::between::<u32>(1, 4))]
    pub scale: Option<u32>,
}

/// `nicbench report`
#[derive(Debug, Args)]
pub struct ReportArgs {
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// The HTML file to write.
    #[arg(short, long, value_name = "PATH", default_value = "report.html")]
    pub out: PathBuf,
    /// Rows of the comparison tables, and the groups of the bar and CPU charts
    /// (by default the runs' cases).
    #[arg(long, value_name = "KEYS", default_value = "case", value_delimiter = ',')]
    pub rows: Vec<String>,
    /// Columns of the tables, and the colours of the bars (e.g. tag:nic);
    /// by default one column per host pair (client -> agent) when the runs
    /// span several, else one column.
    #[arg(long, value_name = "KEYS", default_value = "", value_delimiter = ',')]
    pub cols: Vec<String>,
    /// How several runs of one cell are summed up.
    #[arg(long, value_enum, default_value_t = Stat::Median)]
    pub stat: Stat,
    /// Compare every column of a table with this one (a column's label as
    /// the tables head it, e.g. nic=a or "hostA -> hostB"): a ratio column
    /// ("1.23x") per other column.
    #[arg(long, value_name = "COLUMN")]
    pub baseline: Option<String>,
    /// The page's title.
    #[arg(long, value_name = "TEXT", default_value = "nicbench report")]
    pub title: String,
    /// Add the tables of this plan's [[report.tables]] (several figures
    /// per cell, under the plan's titles) before the one-figure tables.
    #[arg(long, value_name = "PLAN.toml")]
    pub plan: Option<PathBuf>,
}
