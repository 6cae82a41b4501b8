//! What an agent accepts of one test, whichever protocol asked for it
//! (nicbench's `test_request` or an iperf3 client's parameters): the
//! limits the operator sets (`nicbench serve --max-...`) and their checks.
//! Every refusal names the limit and the option that sets it, so the
//! client's user knows what to ask the operator for.
//!
//! Workloads declare an offered rate generically: a paced workload puts
//! `rate_bits_per_second` (per stream, a number) in `TestSpec::params`; the
//! agent multiplies it by the streams of each direction and compares the
//! total with `--max-rate`. A workload that can send unpaced (no rate, or
//! 0 for "as fast as possible") is refused when `--max-rate` is set.
//! Congestion-controlled workloads (`tcp`) declare no rate.

use crate::model::TestSpec;
use crate::units;

/// The key in `TestSpec::params` by which a workload declares its offered
/// rate per stream.
pub const RATE_PARAM: &str = "rate_bits_per_second";

/// The key in `TestSpec::params` by which a workload says it sends
/// datagrams that are not congestion controlled (and so falls under
/// `--max-rate` even without a rate).
pub const UNPACED_PARAM: &str = "unpaced";

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
}

impl Default for TestLimits {
    fn default() -> TestLimits {
        TestLimits {
            max_duration_seconds: 3600.0,
            max_streams: crate::model::spec::MAX_STREAMS,
            max_message_bytes: crate::model::spec::MAX_MESSAGE_BYTES,
            max_buffer_bytes: crate::model::spec::MAX_BUFFER_BYTES,
            max_rate_bits_per_second: None,
        }
    }
}

impl TestLimits {
    /// Checks `spec`; the error names the limit and its option.
    pub fn check(&self, spec: &TestSpec) -> Result<(), String> {
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
            check_rate(spec, max)?;
        }
        Ok(())
    }
}

fn check_rate(spec: &TestSpec, max: f64) -> Result<(), String> {
    let unpaced = spec.params.get(UNPACED_PARAM).and_then(|v| v.as_bool()) == Some(true);
    // A workload that declares the rate key paces by it; the key present
    // without a positive number (null for `-b max`, or 0) means unpaced.
    let total = match spec.params.get(RATE_PARAM) {
        Some(rate) => match rate.as_f64() {
            Some(r) if r > 0.0 => r * f64::from(spec.streams),
            _ => f64::INFINITY,
        },
        None if unpaced => f64::INFINITY,
        None => return Ok(()),
    };
    if total > max {
        let asked = if total.is_finite() {
            units::Rate(total).to_string()
        } else {
            "an unlimited rate".to_string()
        };
        return Err(format!(
            "{asked} offered per direction; this agent allows at most {} (its --max-rate)",
            units::Rate(max)
        ));
    }
    Ok(())
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
        };
        assert!(limits.check(&spec("tcp")).is_ok());
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
        s.params = serde_json::json!({ "unpaced": true });
        assert!(limits.check(&s).is_err());
        // `udp -b max` sends the key as null: unpaced, so refused (this
        // was a way around --max-rate).
        s.params = serde_json::json!({ "rate_bits_per_second": null, "gso": false });
        assert!(limits.check(&s).unwrap_err().contains("unlimited"));
        assert!(TestLimits::default().check(&s).is_ok());
        // tcp declares no rate: congestion control paces it.
        s.params = serde_json::json!({ "nodelay": true });
        assert!(limits.check(&s).is_ok());
    }
}
