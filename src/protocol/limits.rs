//! What an agent accepts of one test, whichever protocol asked for it
//! (nicbench's `test_request` or an iperf3 client's parameters): the
//! limits the operator sets (`nicbench serve --max-...`) and their checks.
//! Every refusal names the limit and the option that sets it, so the
//! client's user knows what to ask the operator for.
//!
//! `--max-rate` holds what a test offers to send per direction, all
//! streams together: [`OfferedRate`]. The agent asks the workload, which
//! reads its own parameters after parsing them (`Workload::offered_rate`:
//! a required method, so no workload can leave it out); a test that sets no
//! rate sends as fast as it can and is unlimited, whatever its workload
//! (TCP's congestion control is no rate limit). Callers that know no
//! workload (the iperf3 server) read the rate a spec declares in its
//! `params` as `rate_bits_per_second` ([`declared_rate`]): absent, null or
//! not above 0 is unlimited too.

use crate::model::TestSpec;
use crate::units;

/// The key in `TestSpec::params` by which a paced workload declares its
/// offered rate per stream.
pub const RATE_PARAM: &str = "rate_bits_per_second";

/// What a test offers to send, as its workload reads its parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OfferedRate {
    /// Paced at this many bits per second per stream.
    PerStream(f64),
    /// As fast as the sender, the network or congestion control allow.
    Unlimited,
}

/// The rate `spec` declares in its `params` ([`RATE_PARAM`]), for callers
/// that know no workload: a positive number is the rate per stream;
/// absent, null, 0 or anything else is unlimited.
pub fn declared_rate(spec: &TestSpec) -> OfferedRate {
    match spec.params.get(RATE_PARAM).and_then(|v| v.as_f64()) {
        Some(rate) if rate > 0.0 && rate.is_finite() => OfferedRate::PerStream(rate),
        _ => OfferedRate::Unlimited,
    }
}

/// What one test may ask for.
#[derive(Debug, Clone, PartialEq)]
pub struct TestLimits {
    /// Longest test, warm-up included.
    pub max_duration_seconds: f64,
    /// Most streams per direction.
    pub max_streams: u32,
    /// Largest write/read/datagram (`-l`).
    pub max_message_bytes: u64,
    /// Largest socket buffer asked for either end.
    pub max_buffer_bytes: u64,
    /// Highest offered rate of a paced workload per direction, all streams.
    pub max_rate_bits_per_second: Option<f64>,
    /// Most memory one test's buffers may hold on the agent (its message
    /// buffers: streams x message size, as the workload counts them).
    pub max_test_memory_bytes: u64,
}

/// The default of `serve --max-test-memory`: 16 streams of 64 MiB, or 128
/// of 8 MiB; far above any ordinary test (128 streams of 128 KiB hold 16 MiB).
pub const DEFAULT_MAX_TEST_MEMORY: u64 = 1 << 30;

/// The buffers a test of `spec` holds on one end when each of its stream
/// ends holds one message: what a workload that says no more holds.
pub fn message_buffers(spec: &TestSpec) -> u64 {
    (spec.flows().len() as u64).saturating_mul(spec.message_bytes)
}

impl Default for TestLimits {
    fn default() -> TestLimits {
        TestLimits {
            max_duration_seconds: 3600.0,
            max_streams: crate::model::spec::MAX_STREAMS,
            max_message_bytes: crate::model::spec::MAX_MESSAGE_BYTES,
            max_buffer_bytes: crate::model::spec::MAX_BUFFER_BYTES,
            max_rate_bits_per_second: None,
            max_test_memory_bytes: DEFAULT_MAX_TEST_MEMORY,
        }
    }
}

impl TestLimits {
    /// Checks `spec` with the rate its `params` declare ([`declared_rate`]);
    /// the error names the limit and its option. The agent, which knows
    /// the workload, calls [`TestLimits::check_offered`].
    pub fn check(&self, spec: &TestSpec) -> Result<(), String> {
        self.check_offered(spec, declared_rate(spec))?;
        self.check_memory(spec, message_buffers(spec))
    }

    /// Checks the `bytes` of buffers a test of `spec` would hold on the
    /// agent (`Workload::agent_memory_bytes`), before anything is allocated.
    pub fn check_memory(&self, spec: &TestSpec, bytes: u64) -> Result<(), String> {
        if bytes <= self.max_test_memory_bytes {
            return Ok(());
        }
        Err(format!(
            "the test would hold {} of buffers on the agent ({} stream ends of {} messages); this agent allows \
             at most {} per test (its --max-test-memory): ask for fewer streams (-P) or a smaller -l",
            units::Size(bytes),
            spec.flows().len(),
            units::Size(spec.message_bytes),
            units::Size(self.max_test_memory_bytes)
        ))
    }

    /// Checks `spec`, offering `offered` per stream; the error names the
    /// limit and its option.
    pub fn check_offered(&self, spec: &TestSpec, offered: OfferedRate) -> Result<(), String> {
        if spec.expected_seconds() > self.max_duration_seconds {
            return Err(format!(
                "the test would last {:.0} s; this agent allows at most {:.0} s (its --max-duration)",
                spec.expected_seconds(),
                self.max_duration_seconds
            ));
        }
        if spec.streams > self.max_streams {
            return Err(format!(
                "{} streams asked; this agent allows at most {} (its --max-streams)",
                spec.streams, self.max_streams
            ));
        }
        if spec.message_bytes > self.max_message_bytes {
            return Err(format!(
                "messages of {} asked; this agent allows at most {} (its --max-message)",
                units::Size(spec.message_bytes),
                units::Size(self.max_message_bytes)
            ));
        }
        let buffers = [&spec.client, &spec.agent]
            .into_iter()
            .flat_map(|s| [s.send_buffer_bytes, s.receive_buffer_bytes])
            .flatten();
        if let Some(biggest) = buffers.max().filter(|&b| b > self.max_buffer_bytes) {
            return Err(format!(
                "a socket buffer of {} asked; this agent allows at most {} (its --max-buffer)",
                units::Size(biggest),
                units::Size(self.max_buffer_bytes)
            ));
        }
        if let Some(max) = self.max_rate_bits_per_second {
            check_rate(spec, offered, max)?;
        }
        Ok(())
    }
}

/// `offered` per stream, over the streams of one direction, against `max`.
fn check_rate(spec: &TestSpec, offered: OfferedRate, max: f64) -> Result<(), String> {
    let asked = match offered {
        OfferedRate::PerStream(rate) => {
            let total = rate * f64::from(spec.streams);
            if total <= max {
                return Ok(());
            }
            units::Rate(total).to_string()
        }
        OfferedRate::Unlimited => format!("an unlimited rate (a {} test that sets no rate)", spec.workload),
    };
    Err(format!(
        "{asked} offered per direction; this agent allows at most {} (its --max-rate): \
         ask for a rate within it (udp -b), or ask the operator",
        units::Rate(max)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::spec::tests::spec;

    #[test]
    fn each_refusal_names_its_option() {
        let limits = TestLimits {
            max_duration_seconds: 5.0,
            max_streams: 2,
            max_message_bytes: 1000,
            max_buffer_bytes: 4096,
            max_rate_bits_per_second: Some(1e6),
            max_test_memory_bytes: 1 << 20,
        };
        // Within every limit: a tcp test that offers a rate within --max-rate.
        assert!(limits.check_offered(&spec("tcp"), OfferedRate::PerStream(1e6)).is_ok());
        let mut s = spec("tcp");
        s.duration_seconds = 10.0;
        assert!(limits.check(&s).unwrap_err().contains("--max-duration"));
        let mut s = spec("tcp");
        s.streams = 3;
        assert!(limits.check(&s).unwrap_err().contains("--max-streams"));
        let mut s = spec("tcp");
        s.message_bytes = 1001;
        assert!(limits.check(&s).unwrap_err().contains("--max-message"));
        let mut s = spec("tcp");
        s.agent.receive_buffer_bytes = Some(8192);
        assert!(limits.check(&s).unwrap_err().contains("--max-buffer"));
    }

    #[test]
    fn the_buffers_a_test_would_hold_are_checked_before_anything_is_allocated() {
        let limits = TestLimits::default();
        let mut s = spec("tcp");
        s.direction = crate::model::Direction::Reverse;
        s.streams = 16;
        s.message_bytes = 64 << 20;
        assert_eq!(message_buffers(&s), 1 << 30);
        assert!(limits.check(&s).is_ok(), "16 x 64 MiB is the default's edge");
        s.streams = 17;
        let e = limits.check(&s).unwrap_err();
        assert!(
            e.contains("17 stream ends of 64 MiB") && e.contains("its --max-test-memory"),
            "{e}"
        );
        // Both directions: two ends per stream.
        s.streams = 9;
        s.direction = crate::model::Direction::Bidir;
        assert!(limits.check(&s).unwrap_err().contains("18 stream ends"));
        assert!(
            limits.check_memory(&s, 1 << 20).is_ok(),
            "the workload's own count decides"
        );
    }

    #[test]
    fn offered_rate_is_checked_per_direction_over_all_streams() {
        let limits = TestLimits {
            max_rate_bits_per_second: Some(1e6),
            ..TestLimits::default()
        };
        let mut s = spec("udp");
        s.streams = 2;
        s.params = serde_json::json!({ "rate_bits_per_second": 400e3 });
        assert!(limits.check(&s).is_ok());
        s.params = serde_json::json!({ "rate_bits_per_second": 600e3 });
        let err = limits.check(&s).unwrap_err();
        assert!(err.contains("--max-rate") && err.contains("Mbit/s"), "{err}");
        s.params = serde_json::json!({ "rate_bits_per_second": 0 });
        assert!(limits.check(&s).unwrap_err().contains("unlimited"));
        // `udp -b max` sends the key as null: unpaced, so refused (this
        // was a way around --max-rate).
        s.params = serde_json::json!({ "rate_bits_per_second": null, "gso": false });
        assert!(limits.check(&s).unwrap_err().contains("unlimited"));
        assert!(TestLimits::default().check(&s).is_ok());
        // A rate left out is no rate limit either (issue 31: `params: {}`
        // sent 1.6 Gbit/s past --max-rate 1M), whatever the workload.
        s.params = serde_json::json!({});
        assert!(limits.check(&s).unwrap_err().contains("unlimited"));
        s.params = serde_json::json!({ "nodelay": true });
        assert!(limits.check(&s).unwrap_err().contains("--max-rate"));
        // What the workload says it offers is what is held.
        assert!(limits.check_offered(&s, OfferedRate::PerStream(400e3)).is_ok());
        assert!(limits.check_offered(&s, OfferedRate::Unlimited).is_err());
    }
}
