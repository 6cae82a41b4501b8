//! Words for the parts of a run's case that workloads share: direction,
//! streams, message size, socket buffers. Each workload's
//! [`super::Stored::case`] puts its own mode and options around them.

use super::{Direction, TestSpec};
use crate::units::{Rate, Size};

/// One part of a run's case: a stable name (`streams`) and its value in
/// words (`4 streams`), as a label shows it.
pub type CasePart = (&'static str, String);

/// A direction in words: `forward`, `reverse`, `both ways`.
pub fn direction(direction: Direction) -> &'static str {
    match direction {
        Direction::Forward => "forward",
        Direction::Reverse => "reverse",
        Direction::Bidir => "both ways",
    }
}

/// `1 stream`, `4 streams`.
pub fn streams(n: u32) -> String {
    match n {
        1 => "1 stream".into(),
        n => format!("{n} streams"),
    }
}

/// A size as people write it: `64 B`, `8 KiB`, `1 MiB`.
pub fn size(bytes: u64) -> String {
    Size(bytes).to_string()
}

/// A rate in words: `1.00 Gbit/s`.
pub fn rate(bits_per_second: f64) -> String {
    Rate(bits_per_second).to_string()
}

/// Direction, streams, the message size (`128 KiB writes`, `1472 B
/// datagrams`: `noun` says what a message is) and the socket buffers when
/// a spec asks for them (`window`): what every stream workload's case has.
pub fn stream_parts(spec: &TestSpec, noun: &str) -> Vec<CasePart> {
    let mut parts = vec![
        ("direction", direction(spec.direction).to_string()),
        ("streams", streams(spec.streams)),
        ("message", format!("{} {noun}", size(spec.message_bytes))),
    ];
    parts.extend(window(spec));
    parts
}

/// The socket buffers a spec asks for (`-w`, `--send-buffer`), which
/// bound the window: `window 256 KiB`, or each end's when they differ.
pub fn window(spec: &TestSpec) -> Option<CasePart> {
    let ends = [
        ("client send", spec.client.send_buffer_bytes),
        ("client receive", spec.client.receive_buffer_bytes),
        ("agent send", spec.agent.send_buffer_bytes),
        ("agent receive", spec.agent.receive_buffer_bytes),
    ];
    let set: Vec<(&str, u64)> = ends.iter().filter_map(|(n, b)| b.map(|b| (*n, b))).collect();
    let first = set.first()?.1;
    if set.len() == ends.len() && set.iter().all(|(_, b)| *b == first) {
        return Some(("window", format!("window {}", size(first))));
    }
    let each: Vec<String> = set.iter().map(|(n, b)| format!("{n} {}", size(*b))).collect();
    Some(("window", format!("buffers {}", each.join(" "))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_reads_as_direction_streams_and_message() {
        let mut spec = crate::model::spec::tests::spec("tcp");
        spec.streams = 4;
        spec.direction = Direction::Reverse;
        spec.message_bytes = 8 << 10;
        assert_eq!(
            stream_parts(&spec, "writes"),
            [
                ("direction", "reverse".to_string()),
                ("streams", "4 streams".to_string()),
                ("message", "8 KiB writes".to_string())
            ]
        );
        spec.client.send_buffer_bytes = Some(256 << 10);
        assert_eq!(
            window(&spec),
            Some(("window", "buffers client send 256 KiB".to_string()))
        );
        for end in [&mut spec.client, &mut spec.agent] {
            end.send_buffer_bytes = Some(256 << 10);
            end.receive_buffer_bytes = Some(256 << 10);
        }
        assert_eq!(window(&spec), Some(("window", "window 256 KiB".to_string())));
    }
}
