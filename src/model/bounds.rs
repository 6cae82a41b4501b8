//! The physical bounds a figure must lie in to be a measurement at all,
//! whoever made it: an agent's report, an iperf3 peer's, an imported file.
//! One place for them, so the live client, the store and the importers
//! refuse the same absurd value (a rate of 1.7e308 bit/s, a CPU of -500 %
//! of 4294967295 cores) with the field named.

use super::side::{CpuReport, SideReport};

/// The fastest rate any figure may claim: 1 Pbit/s.
pub const MAX_BITS_PER_SECOND: f64 = 1e15;
/// The most logical CPUs a host may report (Linux's NR_CPUS tops at 8192).
pub const MAX_LOGICAL_CPUS: u32 = 65_536;
/// The longest time any one figure may span: 400 days.
pub const MAX_SECONDS: f64 = 400.0 * 86_400.0;

/// A figure outside its bounds: which, its value, and why it is none
/// ("-1 bit/s is not a measurement: expected 0 to 1000000000000000 bit/s").
/// Shown as "FIELD: WHY"; the importers keep the field and the reason
/// apart (`store::import::checks::Bad`).
#[derive(Debug, Clone, PartialEq)]
pub struct OutOfRange {
    pub field: String,
    pub value: f64,
    pub why: String,
}

impl std::fmt::Display for OutOfRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.why)
    }
}

impl From<OutOfRange> for String {
    fn from(e: OutOfRange) -> String {
        e.to_string()
    }
}

/// `value` finite and in `lo..=hi` (in `unit`), else why not, naming
/// `field`: the one range test of a figure from outside, for the live
/// client's checks here and the importers' alike.
pub fn within(field: &str, value: f64, lo: f64, hi: f64, unit: &str) -> Result<(), OutOfRange> {
    if value.is_finite() && (lo..=hi).contains(&value) {
        return Ok(());
    }
    Err(OutOfRange {
        field: field.to_string(),
        value,
        why: format!("{value} {unit} is not a measurement: expected {lo} to {hi} {unit}"),
    })
}

/// A rate in bit/s: 0 to 1 Pbit/s.
pub fn rate(field: &str, bits_per_second: f64) -> Result<(), OutOfRange> {
    within(field, bits_per_second, 0.0, MAX_BITS_PER_SECOND, "bit/s")
}

/// One side's CPU report: shares of the host within 0-100 %, as many
/// cores as a host may have, times not negative.
pub fn cpu(prefix: &str, cpu: &CpuReport) -> Result<(), String> {
    let percent =
        |name: &str, value: f64| within(&format!("{prefix}.{name}"), value, 0.0, 100.0, "%").map_err(String::from);
    within(&format!("{prefix}.seconds"), cpu.seconds, 0.0, MAX_SECONDS, "s")?;
    // 0: not known (/proc/stat unreadable, an iperf3 peer's report).
    if cpu.logical_cpus > MAX_LOGICAL_CPUS {
        return Err(format!(
            "{prefix}.logical_cpus is {}, not a host: expected at most {MAX_LOGICAL_CPUS}",
            cpu.logical_cpus
        ));
    }
    for (name, value) in [
        ("utilization_percent", cpu.utilization_percent),
        ("user_percent", cpu.user_percent),
        ("nice_percent", cpu.nice_percent),
        ("system_percent", cpu.system_percent),
        ("softirq_percent", cpu.softirq_percent),
        ("irq_percent", cpu.irq_percent),
        ("iowait_percent", cpu.iowait_percent),
        ("steal_percent", cpu.steal_percent),
        ("busiest_core.utilization_percent", cpu.busiest_core.utilization_percent),
    ] {
        percent(name, value)?;
    }
    if cpu.logical_cpus > 0 && cpu.per_core.len() > cpu.logical_cpus as usize {
        return Err(format!(
            "{prefix}.per_core lists {} cores of a host with {}",
            cpu.per_core.len(),
            cpu.logical_cpus
        ));
    }
    for core in &cpu.per_core {
        percent(
            &format!("per_core[{}].utilization_percent", core.core),
            core.utilization_percent,
        )?;
    }
    // The benchmark's own threads: at most every core for the whole time.
    let cores = match cpu.logical_cpus {
        0 => MAX_LOGICAL_CPUS,
        n => n,
    };
    let most = cpu.seconds * cores as f64 + 1.0;
    within(
        &format!("{prefix}.process.user_seconds"),
        cpu.process.user_seconds,
        0.0,
        most,
        "s",
    )?;
    within(
        &format!("{prefix}.process.system_seconds"),
        cpu.process.system_seconds,
        0.0,
        most,
        "s",
    )?;
    for (name, value) in [
        ("service_demand_us_per_kb", cpu.service_demand_us_per_kb),
        (
            "service_demand_us_per_transaction",
            cpu.service_demand_us_per_transaction,
        ),
        ("threads_service_demand_us_per_kb", cpu.threads_service_demand_us_per_kb),
        (
            "host_work_service_demand_us_per_kb",
            cpu.host_work_service_demand_us_per_kb,
        ),
    ] {
        if let Some(value) = value {
            within(&format!("{prefix}.{name}"), value, 0.0, f64::MAX, "us")?;
        }
    }
    // Threads busy: at most every core, in percent of one.
    if let Some(value) = cpu.threads_percent_of_core {
        let name = format!("{prefix}.threads_percent_of_core");
        within(&name, value, 0.0, cores as f64 * 100.0 + 1.0, "%")?;
    }
    if let Some(value) = cpu.host_work_percent_of_core {
        let name = format!("{prefix}.host_work_percent_of_core");
        within(&name, value, 0.0, cores as f64 * 100.0 + 1.0, "%")?;
    }
    Ok(())
}

/// A side's report: its streams' times and rates (intervals too) and its CPU.
pub fn side_report(report: &SideReport) -> Result<(), String> {
    for end in &report.streams {
        let id = end.stream_id;
        within(&format!("stream {id} seconds"), end.seconds, 0.0, MAX_SECONDS, "s")?;
        rate(&format!("stream {id} bits_per_second"), end.bits_per_second)?;
        for (i, interval) in end.intervals.iter().enumerate() {
            rate(
                &format!("stream {id} interval {i} bits_per_second"),
                interval.bits_per_second,
            )?;
        }
    }
    cpu("cpu", &report.cpu)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sane() -> CpuReport {
        CpuReport {
            seconds: 3.0,
            logical_cpus: 2,
            utilization_percent: 40.0,
            ..CpuReport::default()
        }
    }

    #[test]
    fn a_sane_cpu_report_passes_and_each_absurd_one_is_named() {
        assert_eq!(cpu("cpu", &sane()), Ok(()));
        let mut negative = sane();
        negative.utilization_percent = -500.0;
        let e = cpu("cpu", &negative).unwrap_err();
        assert!(
            e.starts_with("cpu.utilization_percent: -500 % is not a measurement: expected 0 to 100 %"),
            "{e}"
        );
        let mut cores = sane();
        cores.logical_cpus = u32::MAX;
        assert!(cpu("cpu", &cores).unwrap_err().contains("logical_cpus is 4294967295"));
        assert_eq!(cpu("cpu", &CpuReport::default()), Ok(()), "nothing known is no lie");
        let mut over = sane();
        over.system_percent = 100.5;
        assert!(cpu("cpu", &over).is_err());
        let mut busy = sane();
        busy.process.user_seconds = 100.0;
        assert!(cpu("cpu", &busy).unwrap_err().contains("process.user_seconds"));
        let mut nan = sane();
        nan.seconds = f64::NAN;
        assert!(cpu("cpu", &nan).is_err());
    }

    #[test]
    fn a_rate_over_a_petabit_is_no_measurement() {
        assert!(rate("r", 1e15).is_ok());
        let e = rate("r", 1.7e308).unwrap_err();
        assert_eq!((e.field.as_str(), e.value), ("r", 1.7e308));
        assert!(e.to_string().starts_with("r: 170000"), "{e}");
        assert!(rate("r", -1.0).is_err());
        assert!(rate("r", f64::INFINITY).is_err());
    }
}
