//! `receivers`: the receivers of one fan-out test (`nicbench multicast`:
//! one sender, a group, many agents) side by side. A bar per receiver of
//! the rate it received, its loss in % written over it, the slowest
//! receiver in a colour of its own, and the sender's rate across the plot
//! as a line (dashed: what it was asked to offer, when that differs).
//!
//! The fan-out command saves each receiver's trial as a run of its own,
//! tagged with the test they share (`fanout_run`), the agent's name
//! (`agent`) and whether it was the slowest (`slowest`); [`group_tests`]
//! puts those runs back together, one chart per test. Every figure is
//! what the workload reads from the receiver's run
//! ([`crate::workload::FanoutView::stored_figures`]): a figure a run does
//! not hold is left out, never guessed.

use std::collections::BTreeMap;

use plotters::prelude::*;

use super::bars::{draw_group_names, group_label_room, value_label};
use super::legend::{self, Entry, Swatch};
use super::{color, draw_err, font, titled, upper, Area, ChartError, Keyed, Marks, PALETTE};
use crate::model::receivers::ReceiverFigures;

/// The colour of the slowest receiver's bar (the palette's red).
const SLOWEST: RGBColor = PALETTE[3];

/// The colour of the sender's lines.
const SENDER: RGBColor = RGBColor(60, 60, 60);

/// One receiver's run as the report read it from the store.
#[derive(Debug, Clone, PartialEq)]
pub struct SavedReceiver {
    pub run_id: i64,
    /// The test it was part of (its `fanout_run` tag).
    pub fanout_run: String,
    /// The agent as the command line named it (its `agent` tag).
    pub agent: String,
    /// Its `slowest` tag.
    pub slowest: bool,
    pub started_at_unix_seconds: f64,
    /// The test in words, from its case (`multicast to 239.1.2.3:5001`).
    pub test: String,
    pub figures: ReceiverFigures,
}

/// One bar: a receiver, its run and its figures.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceiverBar {
    pub name: String,
    pub run_id: i64,
    pub slowest: bool,
    pub figures: ReceiverFigures,
}

/// The chart of one fan-out test: its receivers in the order they were
/// named (the order their runs were saved).
#[derive(Debug, Clone, PartialEq)]
pub struct Receivers {
    pub title: String,
    /// The test's `fanout_run` tag, to select its runs again.
    pub fanout_run: String,
    pub started_at_unix_seconds: f64,
    pub receivers: Vec<ReceiverBar>,
    /// What the sender sent at, by its own count (as the receivers' runs
    /// hold it); None when the client did not send.
    pub sent_bits_per_second: Option<f64>,
    /// What it was asked to offer; None for "as fast as it can".
    pub offered_bits_per_second: Option<f64>,
}

/// The saved receivers put back into their tests: one chart per
/// `fanout_run`, newest test first, each test's receivers in the order
/// their runs were saved (as the command line named them).
pub fn group_tests(saved: Vec<SavedReceiver>) -> Vec<Receivers> {
    let mut tests: BTreeMap<String, Vec<SavedReceiver>> = BTreeMap::new();
    for receiver in saved {
        tests.entry(receiver.fanout_run.clone()).or_default().push(receiver);
    }
    let mut charts: Vec<Receivers> = tests
        .into_iter()
        .map(|(fanout_run, mut runs)| {
            runs.sort_by_key(|r| r.run_id);
            let started = runs
                .iter()
                .map(|r| r.started_at_unix_seconds)
                .fold(f64::INFINITY, f64::min);
            // One sender for all: the first run that holds its figures.
            let sent = runs.iter().find_map(|r| r.figures.sent_bits_per_second);
            let offered = runs.iter().find_map(|r| r.figures.offered_bits_per_second);
            let title = format!(
                "{}, {} UTC: received rate per receiver, loss over each bar",
                runs[0].test,
                crate::report::runs::utc(started)
            );
            Receivers {
                title,
                fanout_run,
                started_at_unix_seconds: started,
                receivers: runs
                    .into_iter()
                    .map(|r| ReceiverBar {
                        name: r.agent,
                        run_id: r.run_id,
                        slowest: r.slowest,
                        figures: r.figures,
                    })
                    .collect(),
                sent_bits_per_second: sent,
                offered_bits_per_second: offered,
            }
        })
        .collect();
    charts.sort_by(|a, b| {
        b.started_at_unix_seconds
            .total_cmp(&a.started_at_unix_seconds)
            .then_with(|| b.fanout_run.cmp(&a.fanout_run))
    });
    charts
}

/// A rate in Mbit/s as the chart writes it: `20.0 Mbit/s`.
fn mbit(bits_per_second: f64) -> String {
    format!("{:.1} Mbit/s", bits_per_second / 1e6)
}

/// A loss as the chart and the table write it: `0.52%`.
pub fn loss_text(loss_percent: f64) -> String {
    format!("{loss_percent:.2}%")
}

impl Receivers {
    /// The slowest receiver, when one is marked.
    pub fn slowest(&self) -> Option<&ReceiverBar> {
        self.receivers.iter().find(|r| r.slowest)
    }

    /// Whether the offered rate is worth a line of its own: it differs
    /// from the sent one by more than 1% (or nothing was sent).
    fn offered_apart(&self) -> Option<f64> {
        let offered = self.offered_bits_per_second?;
        match self.sent_bits_per_second {
            Some(sent) if (sent - offered).abs() <= offered * 0.01 => None,
            _ => Some(offered),
        }
    }

    /// What the legend names: the bars, the slowest, the sender's lines.
    pub fn series_names(&self) -> Vec<String> {
        self.legend().into_iter().map(|e| e.text).collect()
    }

    fn legend(&self) -> Vec<Entry> {
        let mut entries = vec![Entry {
            swatch: Swatch::Box,
            color: color(0),
            text: "received rate".into(),
        }];
        if let Some(slowest) = self.slowest() {
            entries.push(Entry {
                swatch: Swatch::Box,
                color: SLOWEST,
                text: format!("slowest: {}", slowest.name),
            });
        }
        if let Some(sent) = self.sent_bits_per_second {
            let offered = match (self.offered_bits_per_second, self.offered_apart()) {
                (Some(o), None) => format!(" (offered {})", mbit(o)),
                _ => String::new(),
            };
            entries.push(Entry {
                swatch: Swatch::Line,
                color: SENDER,
                text: format!("sender sent {}{offered}", mbit(sent)),
            });
        }
        if let Some(offered) = self.offered_apart() {
            entries.push(Entry {
                swatch: Swatch::Line,
                color: PALETTE[7],
                text: format!("offered {} (dashed)", mbit(offered)),
            });
        }
        entries
    }

    /// A sentence saying what the chart shows, for screen readers.
    pub fn description(&self) -> String {
        let slowest = self
            .slowest()
            .map(|s| format!(", the slowest ({}) in red", s.name))
            .unwrap_or_default();
        let sender = match self.sent_bits_per_second {
            Some(sent) => format!(", the sender's rate ({}) as a line across", mbit(sent)),
            None => String::new(),
        };
        let names: Vec<&str> = self.receivers.iter().map(|r| r.name.as_str()).collect();
        format!(
            "Bar chart of the rate each of {} receivers received (Mbit/s), its loss in % over its bar{slowest}{sender}; \
             receivers: {}.",
            self.receivers.len(),
            names.join(", ")
        )
    }

    /// What a hover over a receiver's bar shows.
    fn tip(&self, r: &ReceiverBar) -> String {
        let mut tip = format!("{}\nrun {}", r.name, r.run_id);
        if let Some(c) = &r.figures.counts {
            tip += &format!(
                "\nreceived {} ({} datagrams)\nlost {} ({})",
                mbit(c.received_bits_per_second),
                c.received_datagrams,
                c.lost_datagrams,
                loss_text(c.loss_percent)
            );
        }
        tip += &format!("\n{}", r.figures.standing);
        if r.slowest {
            tip += ", slowest";
        }
        tip
    }

    pub(crate) fn draw<DB: DrawingBackend>(&self, root: &Area<DB>, marks: &Marks) -> Result<(), ChartError> {
        let area = titled(root, marks, &self.title)?;
        let area = legend::strip(&area, marks, &self.legend())?;
        let n = self.receivers.len().max(1);
        let mbits = |bits: f64| (bits / 1e6).max(0.0);
        let top = self
            .receivers
            .iter()
            .filter_map(|r| r.figures.counts.map(|c| c.received_bits_per_second))
            .chain(self.sent_bits_per_second)
            .chain(self.offered_bits_per_second)
            .map(mbits)
            .fold(0.0, f64::max);
        let ceiling = upper(top);
        let names: Vec<String> = self.receivers.iter().map(|r| r.name.clone()).collect();
        let centers: Vec<f64> = (0..n).map(|i| i as f64 + 0.5).collect();
        let (shown, label_room) = group_label_room(&area, &names, 100, 0.4);
        let apart = shown.drawn_apart();
        let mut chart = ChartBuilder::on(&area)
            .margin(12)
            .x_label_area_size(label_room)
            .y_label_area_size(72)
            .build_cartesian_2d(Keyed::linear(0f64..n as f64, centers), 0f64..ceiling)
            .map_err(draw_err)?;
        marks.set("axes");
        let name_at = |v: &f64| match apart {
            true => String::new(),
            false => names.get(v.floor().max(0.0) as usize).cloned().unwrap_or_default(),
        };
        chart
            .configure_mesh()
            .max_light_lines(0)
            .disable_x_mesh()
            .x_label_formatter(&name_at)
            .y_label_formatter(&|v| format!("{v}"))
            .x_desc(if apart { "" } else { "receiver (agent)" })
            .y_desc("received rate (Mbit/s)")
            .label_style(font(13))
            .axis_desc_style(font(14))
            .draw()
            .map_err(draw_err)?;
        draw_group_names(&mut chart, &area, &names, &shown, label_room)?;
        marks.set("data");
        let plot_width = chart.plotting_area().dim_in_pixel().0 as f64;
        let bar_pixels = plot_width / n as f64 * 0.7 * 0.9;
        for (i, r) in self.receivers.iter().enumerate() {
            let Some(counts) = r.figures.counts else { continue };
            marks.tip(Some(self.tip(r)));
            let fill = if r.slowest { SLOWEST } else { color(0) };
            let height = mbits(counts.received_bits_per_second).min(ceiling);
            chart
                .draw_series([Rectangle::new(
                    [(i as f64 + 0.15, 0.0), (i as f64 + 0.85, height)],
                    fill.filled(),
                )])
                .map_err(draw_err)?;
        }
        marks.tip(None);
        let lines = [(self.sent_bits_per_second, false), (self.offered_apart(), true)];
        for (rate, dashed) in lines {
            let Some(rate) = rate else { continue };
            let y = mbits(rate).min(ceiling);
            let ends = vec![(0.0, y), (n as f64, y)];
            match dashed {
                false => chart
                    .draw_series(LineSeries::new(ends, SENDER.stroke_width(2)))
                    .map(|_| ())
                    .map_err(draw_err)?,
                true => chart
                    .draw_series(DashedLineSeries::new(ends, 8, 6, PALETTE[7].stroke_width(2)))
                    .map(|_| ())
                    .map_err(draw_err)?,
            }
        }
        marks.set("labels");
        let area = chart.plotting_area().clone();
        let labels = self.receivers.iter().enumerate().filter_map(|(i, r)| {
            let (text, height) = match r.figures.counts {
                Some(c) => (
                    format!("{} lost", loss_text(c.loss_percent)),
                    mbits(c.received_bits_per_second).min(ceiling),
                ),
                None => ("no counts".to_string(), 0.0),
            };
            let text = if r.slowest { format!("slowest, {text}") } else { text };
            value_label(&area, text, (i as f64 + 0.5, height), bar_pixels)
        });
        chart.draw_series(labels).map_err(draw_err)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::receivers::ReceiverCounts;

    fn saved(run_id: i64, fanout_run: &str, agent: &str, slowest: bool, lost: u64) -> SavedReceiver {
        let started = if fanout_run == "older" { 1.7e9 } else { 1.8e9 };
        SavedReceiver {
            run_id,
            fanout_run: fanout_run.into(),
            agent: agent.into(),
            slowest,
            started_at_unix_seconds: started,
            test: "multicast to 239.1.2.3:5001".into(),
            figures: ReceiverFigures {
                counts: Some(ReceiverCounts {
                    received_bits_per_second: 19e6,
                    received_datagrams: 1000 - lost,
                    lost_datagrams: lost,
                    loss_percent: lost as f64 / 10.0,
                }),
                join_latency_seconds: Some(0.001),
                standing: if lost == 0 { "complete" } else { "losing" }.into(),
                sent_bits_per_second: Some(20e6),
                offered_bits_per_second: Some(20e6),
            },
        }
    }

    /// Runs of two tests, saved interleaved, come back as two charts:
    /// the newer test first, each test's receivers in the order their
    /// runs were saved, the one tagged slowest marked, the sender's rate
    /// from the runs.
    #[test]
    fn saved_receivers_group_by_their_test_in_saved_order_with_the_slowest_marked() {
        let charts = group_tests(vec![
            saved(5, "newer", "b:9000", true, 30),
            saved(1, "older", "a:9000", false, 0),
            saved(4, "newer", "a:9000", false, 0),
            saved(2, "older", "b:9000", false, 0),
            saved(3, "older", "c:9000", true, 2),
        ]);
        assert_eq!(charts.len(), 2);
        let names = |c: &Receivers| c.receivers.iter().map(|r| r.name.clone()).collect::<Vec<_>>();
        assert_eq!(charts[0].fanout_run, "newer");
        assert_eq!(names(&charts[0]), ["a:9000", "b:9000"]);
        assert_eq!(charts[1].fanout_run, "older");
        assert_eq!(names(&charts[1]), ["a:9000", "b:9000", "c:9000"]);
        assert_eq!(charts[1].slowest().map(|s| s.run_id), Some(3));
        assert_eq!(charts[0].slowest().map(|s| s.name.as_str()), Some("b:9000"));
        assert_eq!(charts[0].sent_bits_per_second, Some(20e6));
        assert!(
            charts[0].title.contains("multicast to 239.1.2.3:5001"),
            "{}",
            charts[0].title
        );
        // Sent at the offered rate: one line, the offer in its legend entry.
        let legend = charts[0].series_names();
        assert_eq!(
            legend,
            [
                "received rate",
                "slowest: b:9000",
                "sender sent 20.0 Mbit/s (offered 20.0 Mbit/s)"
            ]
        );
        assert!(charts[0].description().contains("the slowest (b:9000) in red"));
    }

    /// The chart draws a bar per receiver with counts, writes each loss
    /// over its bar, and leaves out what no run holds: no sender line
    /// when the client did not send, no bar without counts.
    #[test]
    fn each_bar_carries_its_loss_and_a_receiver_without_counts_has_none() {
        let mut quiet = saved(2, "t", "b:9000", true, 0);
        quiet.figures.counts = None;
        quiet.figures.standing = "failed".into();
        let mut charts = group_tests(vec![saved(1, "t", "a:9000", false, 30), quiet]);
        for r in &mut charts[0].receivers {
            r.figures.sent_bits_per_second = None;
        }
        charts[0].sent_bits_per_second = None;
        charts[0].offered_bits_per_second = None;
        let svg = super::super::render_svg(&super::super::Chart::Receivers(charts[0].clone()), (900, 520)).unwrap();
        assert!(svg.contains("3.00% lost"), "the first receiver's loss");
        assert!(svg.contains("slowest, no counts"), "the second has no bar, and says so");
        assert_eq!(svg.matches("data-tip=").count(), 1, "one bar: {svg}");
        assert!(!svg.contains("sender sent"));
    }
}
