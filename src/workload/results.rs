//! What a workload's results hold and how they read, one small trait per
//! concern ([`Figures`], [`Stored`], [`VerdictQuestions`], [`TextView`],
//! [`ChartViews`]); [`ResultKind`] is all five, what the registry hands out.

use std::io::{self, Write};

use super::case::{self, CasePart};
use super::{Figure, Metric};
use crate::model::{Flow, FlowTotal, TestSpec, TrialResult, Verdict};

/// What a trial of the workload measures: its own totals, the figure
/// trials are compared by, the figures tables list. Every method has the
/// answer of plain bulk throughput (the `tcp` workload) as its default.
pub trait Figures: Sync {
    /// The figures runs of this workload have, in the order tables list
    /// them: what compare, charts and the report show for them, and only
    /// for them (rr has no receiver throughput, nor a CPU cost per KB).
    fn figures(&self) -> &'static [Metric] {
        &Metric::BULK
    }

    /// The figures `runs` lists for a run in place of its headline, when
    /// one number would mislead (a watch: transmitted and received apart,
    /// never their sum); empty: the headline.
    fn listed_figures(&self) -> &'static [Metric] {
        &[]
    }

    /// Puts the workload's own totals into a freshly merged trial (per
    /// stream, per direction, in sum), from what each end reported.
    fn summarize(&self, _trial: &mut TrialResult) {}

    /// The figure trials are compared by; higher is better.
    fn figure_of_merit(&self, trial: &TrialResult) -> Figure {
        Figure::receiver_rate(trial)
    }

    /// Where a document holds the figure of merit: the store's headline
    /// of a run and of each trial. Its name is the figure of merit's.
    fn headline(&self) -> Metric {
        Metric::RECEIVER_RATE
    }

    /// The figure a mesh matrix shows for one run of the workload, and the
    /// /probe and mesh metrics' headline.
    fn mesh_figure(&self) -> Metric {
        Metric::RECEIVER_RATE
    }

    /// The share of what was offered that was lost in one direction
    /// (`total`) of `trial`: datagrams, transactions. None when the
    /// workload has no notion of loss.
    fn loss_ratio(&self, _total: &FlowTotal, _trial: &TrialResult) -> Option<f64> {
        None
    }

    /// Round trips of `trial`, when the workload measures them.
    fn round_trips(&self, _trial: &TrialResult) -> Option<RoundTrips> {
        None
    }
}

/// How the store keeps the workload's runs: the case runs pool by and the
/// workload's own columns of the `runs` table.
pub trait Stored: Sync {
    /// What distinguishes the configuration of a run of `spec`, in the
    /// order a label names it: the workload and its mode first (`TCP`,
    /// `rr UDP`, `sweep stream`), then direction, streams, sizes and the
    /// options that change what is measured. Runs whose parts are equal
    /// (with the store's MTU and plan axes) are one case and may be pooled.
    fn case(&self, spec: &TestSpec) -> Vec<CasePart> {
        let mut parts = vec![("workload", spec.workload.clone())];
        parts.extend(case::stream_parts(spec, "writes"));
        parts
    }

    /// The store's columns of the workload's own figures (a column of
    /// `runs` each, named by the metric), besides the generic ones.
    fn stored_columns(&self) -> &'static [Metric] {
        &[]
    }
}

/// What the verdict asks of the workload's results (`verdict`): whether the
/// line rate bounds them, the payload and datagrams it cannot see in the
/// streams' counts, and the findings only the workload can give.
pub trait VerdictQuestions: Sync {
    /// Payload the test moved in `trial` that its streams' byte counts
    /// leave out (a ping-pong sweep's echoes): the verdict sets an
    /// interface's bytes against all of the test's own.
    fn unseen_bytes(&self, _trial: &TrialResult) -> u64 {
        0
    }

    /// The UDP datagrams the test sent in `trial` (warm-up included), when
    /// its traffic is datagrams: the host's UDP counters (RcvbufErrors) may
    /// then speak for it, if the host saw no more datagrams arrive than
    /// the test sent. None for a TCP test, which is never given a UDP
    /// cause from someone else's datagrams.
    fn datagrams_sent(&self, _trial: &TrialResult) -> Option<u64> {
        None
    }

    /// Whether the average bit rate is bulk throughput that the line rate
    /// bounds (not for transactions, nor for a sweep's average).
    fn line_rate_applies(&self) -> bool {
        true
    }

    /// The full-size packet of the test's traffic when its transport packs
    /// the bytes into datagrams of its own (QUIC): the IP packet and the
    /// payload it carries. None: the sockets tell it (TCP's MSS and path
    /// MTU, UDP's message size).
    fn full_packet(&self, _trial: &TrialResult, _ipv6: bool) -> Option<(u64, u64)> {
        None
    }

    /// Why this trial has no one link's line rate although the workload's
    /// figures are bulk throughput (a stream the transport spread over
    /// several paths), in words for `Line rate: n/a (...)`; None: it has.
    fn several_paths(&self, _trial: &TrialResult) -> Option<String> {
        None
    }

    /// The link the line-rate model chose for the run (the option, the
    /// slower NIC, a shaper on an end or a lab router's on the path), for
    /// a workload that compares figures of its own with it (a sweep's
    /// sizes, the round trips of rr against what a wire of a shaper's rate
    /// would take). Called for every trial, whether or not
    /// `line_rate_applies`.
    fn note_link(&self, _trial: &mut TrialResult, _spec: &TestSpec, _link: &crate::model::LinkUsed) {}

    /// Findings only this workload can give, each as a verdict with its
    /// side (UDP loss at the receiving socket or on the path, a sender
    /// below its offered rate, what held a files transfer back). The
    /// verdict's reasoning step places them among the generic findings by
    /// their kind (docs/FACTS.md, the verdict).
    fn findings(&self, _trial: &TrialResult) -> Vec<Verdict> {
        Vec::new()
    }

    /// Whether the senders reached the rate they were asked to offer (UDP
    /// `-b`); None without an offer. A sender that reached its offer was
    /// not limited by its CPU, however long its threads waited.
    fn sender_reached_offer(&self, _trial: &TrialResult) -> Option<bool> {
        None
    }

    /// True when the test's threads busy-poll by design (`rr --spin`): on
    /// a CPU all the time whatever limits them, so their CPU use is no
    /// sign of a bottleneck.
    fn threads_spin(&self, _trial: &TrialResult) -> bool {
        false
    }

    /// True when [`VerdictQuestions::findings`] answer the question the test
    /// exists for, so a full link is "also" beside them rather than their
    /// cause: a files transfer is judged against raw TCP on the same path.
    fn own_verdict_before_the_link(&self) -> bool {
        false
    }
}

/// How the workload's part of the text report reads (`report::text`):
/// header, stream table and the lines after the sums and the CPU.
pub trait TextView: Sync {
    /// Why the socket buffers are what they are when nobody asked for a
    /// size, when the workload sets its own (UDP receivers).
    fn default_buffers_note(&self) -> Option<String> {
        None
    }

    /// The figures of a `[SUM]` line of one direction, in place of bytes
    /// and bit rates where those mean nothing (transactions, a sweep).
    fn sum_cells(&self, _trial: &TrialResult, _flow: Flow) -> Option<String> {
        None
    }

    /// What the test's messages are, for the header line (rr: its request
    /// and response sizes); None: "SIZE messages".
    fn messages_text(&self, _spec: &crate::model::TestSpec) -> Option<String> {
        None
    }

    /// The stream table's column names after "flow" where the workload has
    /// columns of its own (rr's transactions), aligned with its
    /// [`TextView::sum_cells`] and [`TextView::stream_cells`]; None:
    /// the sender and receiver byte and rate columns.
    fn table_head(&self) -> Option<String> {
        None
    }

    /// One stream's row under [`TextView::table_head`].
    fn stream_cells(&self, _stream: &crate::model::StreamResult) -> Option<String> {
        None
    }

    /// Lines after the `[SUM]` lines (UDP loss, transactions and latency).
    fn write_summary(&self, _trial: &TrialResult, _out: &mut dyn Write) -> io::Result<()> {
        Ok(())
    }

    /// Lines after the CPU lines (a sweep's table).
    fn write_details(&self, _trial: &TrialResult, _out: &mut dyn Write) -> io::Result<()> {
        Ok(())
    }
}

/// The charts the workload's runs can be drawn as, besides the generic
/// ones (`plot --kind`, the HTML report).
pub trait ChartViews: Sync {
    /// The chart kinds this workload's runs can be drawn as, besides the
    /// generic ones, each with how a run document reads as that chart.
    fn chart_kinds(&self) -> &'static [ChartKind] {
        &[]
    }
}

/// What a workload's results hold and how they read, one trait per
/// concern; the verdict takes a `&dyn VerdictQuestions` and the text
/// report a `&dyn TextView`, nothing more of the workload. Implemented for
/// every type that implements all five.
pub trait ResultKind: Figures + Stored + VerdictQuestions + TextView + ChartViews {}

impl<T: Figures + Stored + VerdictQuestions + TextView + ChartViews> ResultKind for T {}

/// Percentiles of round trips, in seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RoundTrips {
    pub p50_seconds: f64,
    pub p90_seconds: f64,
    pub p99_seconds: f64,
}

/// A chart a workload's runs can be drawn as: its name (`plot --kind`)
/// and the shape of data it takes from each run document.
#[derive(Debug, Clone, Copy)]
pub struct ChartKind {
    pub name: &'static str,
    /// One line for `plot --help`: what the chart shows.
    pub help: &'static str,
    pub data: ChartData,
    /// What to say when no selected run can be drawn this way.
    pub none_found: &'static str,
}

/// The data of a workload's chart, found in each run document.
#[derive(Debug, Clone, Copy)]
pub enum ChartData {
    /// Bandwidth and latency against message size: the first end whose
    /// part at `key` holds `points` (`size_bytes`, `best_bits_per_second`,
    /// `best_latency_us`) and a `summary` (`peak_size_bytes`,
    /// `peak_bits_per_second`, `half_peak_size_bytes`).
    SizeCurve { key: &'static str },
    /// Latency percentiles from the histogram at `pointer` (buckets of
    /// `value_us` and `count`).
    LatencyHistogram { pointer: &'static str },
    /// A chart of one run at a time that the workload draws itself, from
    /// its own folder: `draw` reads a run document (and titles it after
    /// the run's label), None when the run holds nothing to draw (an
    /// import). The report draws it for each of the newest few runs;
    /// `subject` names what it shows, for the sentence saying which.
    PerRun {
        draw: fn(doc: &serde_json::Value, run: &str) -> Option<std::sync::Arc<dyn crate::chart_kit::RunChart>>,
        subject: &'static str,
    },
}

impl ChartData {
    /// Whether the chart is of one run at a time (the report draws it per
    /// run, not once over all runs).
    pub fn is_per_run(&self) -> bool {
        matches!(self, ChartData::PerRun { .. })
    }
}

/// Plain bulk throughput: every default of [`ResultKind`].
pub struct Throughput;

impl Figures for Throughput {}
impl Stored for Throughput {}
impl VerdictQuestions for Throughput {}
impl TextView for Throughput {}
impl ChartViews for Throughput {}
