//! nicbench: a network benchmark suite. docs/ARCHITECTURE.md is the map.
//!
//! Layers, top to bottom; a module names only modules on lower floors, and
//! on its own floor only where no circle forms; inside a module, no two
//! files name each other (`tests/cli/layers.rs` checks both):
//!
//! 1. `main` (the binary)
//! 2. `cmd` (one function per subcommand), `cli` (its clap definitions)
//! 3. `plan` (what users write and `nicbench run` executes), `agent`
//!    (`nicbench serve`), `lab` (namespaces with links)
//! 4. `session` (client side of one test), `iperf3` (iperf3's protocol,
//!    an adapter over the session's services)
//! 5. in an order of its own: 5a `report` (renderers), `metrics`
//!    (Prometheus); 5b `repeat` (one case's trials), `side_runner` (runs
//!    one side of one trial); 5c `verdict`, `mesh` (matrices, schedules and
//!    outliers of many agents); 5d `store` (SQLite)
//! 6. `workload` (traffic engines behind one trait), `multilink`
//!    (several links at once)
//! 7. `probe` (CPU, TCP_INFO, host facts), `protocol` (control messages),
//!    `address` (HOST, HOST:PORT, [v6]:PORT), `lab_env` (what `lab exec`
//!    tells its command about the lab's router)
//! 8. `model` (result types)
//! 9. `units`, `stats`, `linerate`, `logging`, `shell` (quoting),
//!    `csv_out` (the one CSV writer), `outside_text` (strings from outside,
//!    made safe per output, JSON too), `chart_kit` (what every chart is
//!    drawn with: font, axes, legend, SVG and PNG backends)

/// `println!`, `print!`, `eprintln!` and `eprint!` for every module of the
/// crate (defined before them, these shadow std's): std's panic when the
/// reader of a pipe has gone (`nicbench ... 2>&1 | head -1` exited 101),
/// these end the output ([`logging::print_text`]).
macro_rules! println {
    () => { $crate::logging::print_text(false, format_args!("\n")) };
    ($($arg:tt)*) => { $crate::logging::print_text(false, format_args!("{}\n", format_args!($($arg)*))) };
}
#[allow(unused_macros)] // for the next `print!`: none is in use now
macro_rules! print {
    ($($arg:tt)*) => { $crate::logging::print_text(false, format_args!($($arg)*)) };
}
macro_rules! eprintln {
    () => { $crate::logging::print_text(true, format_args!("\n")) };
    ($($arg:tt)*) => { $crate::logging::print_text(true, format_args!("{}\n", format_args!($($arg)*))) };
}
macro_rules! eprint {
    ($($arg:tt)*) => { $crate::logging::print_text(true, format_args!($($arg)*)) };
}

pub mod address;
pub mod agent;
pub mod chart_kit;
pub mod cli;
pub mod cmd;
pub mod csv_out;
pub mod iperf3;
pub mod lab;
pub mod lab_env;
pub mod linerate;
pub mod logging;
pub mod mesh;
pub mod metrics;
pub mod model;
pub mod multilink;
pub mod outside_text;
pub mod plan;
pub mod probe;
pub mod protocol;
pub mod repeat;
pub mod report;
pub mod session;
pub mod shell;
pub mod side_runner;
pub mod stats;
pub mod store;
pub mod units;
pub mod verdict;
pub mod workload;
