//! `nicbench linerate`: the line-rate model over every speed and size asked.

use std::io::Write;

use anyhow::Context;

use crate::cli::LinerateArgs;
use crate::linerate::{self, LineRate, Size};
use crate::report::linerate as render;

/// Every (speed, size) case, speeds outermost.
pub fn cases(args: &LinerateArgs) -> anyhow::Result<Vec<LineRate>> {
    let sizes: Vec<Size> = if !args.mtus.is_empty() {
        args.mtus.iter().map(|&b| Size::Mtu(b)).collect()
    } else if !args.payloads.is_empty() {
        args.payloads.iter().map(|&b| Size::Payload(b)).collect()
    } else if !args.frames.is_empty() {
        args.frames.iter().map(|&b| Size::Frame(b)).collect()
    } else {
        vec![Size::Frame(64), Size::Frame(1518)]
    };
    let mut rows = Vec::new();
    for &speed in &args.speeds {
        for &size in &sizes {
            let row = linerate::compute(speed as f64, size, args.stack, args.vlan)
                .with_context(|| format!("{} with --stack {}", option_of(size), args.stack.name()))?;
            rows.push(row);
        }
    }
    Ok(rows)
}

/// The option a size came from, for error messages.
fn option_of(size: Size) -> String {
    match size {
        Size::Frame(b) => format!("--frame {b}"),
        Size::Mtu(b) => format!("--mtu {b}"),
        Size::Payload(b) => format!("--payload {b}"),
    }
}

pub fn run(args: LinerateArgs) -> anyhow::Result<()> {
    let rows = cases(&args)?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let written = if args.json {
        render::json(&rows, &mut out)
    } else if args.csv {
        render::csv(&rows, &mut out)
    } else {
        render::text(&rows, &mut out)
    };
    super::stdout::closed_pipe_is_the_end(written.and_then(|_| out.flush()), "writing the table")
}
