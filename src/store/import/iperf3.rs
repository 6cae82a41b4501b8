//! iperf3 `-J` documents (3.x, TCP and UDP, client or server side) as runs.
//! iperf3 carries no host name of the peer, no MTU, no link speed and no
//! latency percentiles: those columns stay NULL.

use serde_json::Value;

use super::checks::{self, Bad};
use super::Imported;
use crate::store::columns::{headline, Columns};
use crate::workload::transport::Proto;

/// Why an iperf3 document is not imported.
#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// Not the document of a finished iperf3 test.
    Document(String),
    /// A figure outside its range.
    Figure(Bad),
}

impl From<String> for Error {
    fn from(what: String) -> Error {
        Error::Document(what)
    }
}

impl From<&str> for Error {
    fn from(what: &str) -> Error {
        Error::Document(what.into())
    }
}

/// The value at a dotted path of an iperf3 document (`sum_received.bits_per_second`).
fn at<'a>(doc: &'a Value, path: &str) -> Option<&'a Value> {
    doc.pointer(&format!("/{}", path.replace('.', "/")))
}

fn number(doc: &Value, path: &str) -> Option<f64> {
    at(doc, path).and_then(Value::as_f64)
}

/// Reads an iperf3 document; the error says what was expected, or which
/// figure is out of its range.
pub fn parse(doc: Value) -> Result<Imported, Error> {
    let columns = columns_of(&doc)?;
    // iperf3 states no core count: CPU is held to the general bound.
    checks::columns(&columns, &field_of, [None, None]).map_err(Error::Figure)?;
    checks::document_figures(&doc, checks::IPERF3_FIGURES).map_err(Error::Figure)?;
    Ok(Imported {
        source: "iperf3",
        document: doc,
        columns,
    })
}

/// Where iperf3 keeps what each column holds.
fn field_of(column: &str) -> String {
    match column {
        "receiver_bits_per_second" => "end.sum_received.bits_per_second",
        "sender_bits_per_second" => "end.sum_sent.bits_per_second",
        "loss_percent" => "end.sum_received.lost_percent",
        "client_cpu_percent" | "agent_cpu_percent" => "end.cpu_utilization_percent",
        "streams" => "start.test_start.num_streams",
        "message_bytes" => "start.test_start.blksize",
        other => other,
    }
    .to_string()
}

fn columns_of(doc: &Value) -> Result<Columns, Error> {
    if let Some(error) = doc.get("error").and_then(Value::as_str) {
        return Err(format!("iperf3 reported an error and no result: {error}").into());
    }
    let (Some(start), Some(end)) = (doc.get("start"), doc.get("end")) else {
        return Err("expected an iperf3 -J document (with \"start\" and \"end\") or a nicbench.run/1 document".into());
    };
    let test = start
        .get("test_start")
        .ok_or("iperf3 document without start.test_start: expected the output of a finished test")?;
    let transport = match test.get("protocol").and_then(Value::as_str) {
        Some("TCP") => Proto::TCP,
        Some("UDP") => Proto::UDP,
        Some(other) => return Err(format!("iperf3 protocol '{other}' is not imported (expected TCP or UDP)").into()),
        None => return Err("iperf3 document without start.test_start.protocol".into()),
    };
    let flag = |key: &str| test.get(key).and_then(Value::as_i64).unwrap_or(0) != 0;
    let direction = if flag("bidir") {
        "bidir"
    } else if flag("reverse") {
        "reverse"
    } else {
        "forward"
    };
    // This side's uname -a: "Linux HOSTNAME KERNEL ...".
    let this_host = start
        .get("system_info")
        .and_then(Value::as_str)
        .and_then(|s| s.split_whitespace().nth(1))
        .map(str::to_string);
    let client_side = start.get("connecting_to").is_some();
    let peer = if client_side {
        at(start, "connecting_to.host")
            .and_then(Value::as_str)
            .map(|h| (h.to_string(), at(start, "connecting_to.port").and_then(Value::as_i64)))
    } else {
        None
    };
    let workload = crate::workload::bulk_streams(transport).name();
    let (received, sent, loss) = if transport.is_datagram() {
        // 3.12 has sum_received and sum_sent; older versions one sum.
        let received = number(end, "sum_received.bits_per_second").or_else(|| number(end, "sum.bits_per_second"));
        let loss = number(end, "sum_received.lost_percent").or_else(|| number(end, "sum.lost_percent"));
        (received, number(end, "sum_sent.bits_per_second"), loss)
    } else {
        (
            number(end, "sum_received.bits_per_second"),
            number(end, "sum_sent.bits_per_second"),
            None,
        )
    };
    if received.is_none() && sent.is_none() {
        return Err("iperf3 document without end.sum_received or end.sum: the test did not finish".into());
    }
    let (local_cpu, remote_cpu) = (
        number(end, "cpu_utilization_percent.host_total"),
        number(end, "cpu_utilization_percent.remote_total"),
    );
    let started_at = number(start, "timestamp.timesecs");
    if let Some(t) = started_at {
        checks::started_at("start.timestamp.timesecs", t).map_err(Error::Figure)?;
    }
    // The CPU of this side and of the other, each its own field.
    for key in ["host_total", "remote_total"] {
        if let Some(v) = number(end, &format!("cpu_utilization_percent.{key}")) {
            checks::columns(
                &Columns {
                    client_cpu_percent: Some(v),
                    ..Columns::default()
                },
                &|_| format!("end.cpu_utilization_percent.{key}"),
                [None, None],
            )
            .map_err(Error::Figure)?;
        }
    }
    let mut columns = Columns {
        started_at_unix_seconds: started_at.unwrap_or(0.0),
        nicbench_version: None,
        agent_address: peer.map(|(host, port)| match port {
            Some(p) if host.contains(':') => format!("[{host}]:{p}"),
            Some(p) => format!("{host}:{p}"),
            None => host,
        }),
        client_host: if client_side { this_host.clone() } else { None },
        agent_host: if client_side { None } else { this_host },
        workload: workload.into(),
        direction: Some(direction.into()),
        streams: test.get("num_streams").and_then(Value::as_i64),
        message_bytes: test.get("blksize").and_then(Value::as_i64),
        receiver_bits_per_second: received,
        sender_bits_per_second: sent,
        workload_figures: loss.map(|l| ("loss_percent", l)).into_iter().collect(),
        client_cpu_percent: if client_side { local_cpu } else { remote_cpu },
        agent_cpu_percent: if client_side { remote_cpu } else { local_cpu },
        ..Columns::default()
    };
    columns.headline = headline(&columns);
    Ok(columns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_udp_document_of_3_12_gives_the_receiver_and_the_loss() {
        let doc = json!({
            "start": {"system_info": "Linux vm 6.1 #1 SMP x86_64", "connecting_to": {"host": "::1", "port": 5201},
                      "timestamp": {"timesecs": 1700000000},
                      "test_start": {"protocol": "UDP", "num_streams": 2, "blksize": 1448, "reverse": 1}},
            "end": {"sum_sent": {"bits_per_second": 2e8}, "sum_received": {"bits_per_second": 1.5e8, "lost_percent": 25.0},
                    "cpu_utilization_percent": {"host_total": 10.0, "remote_total": 20.0}}
        });
        let c = parse(doc).unwrap().columns;
        assert_eq!(c.workload, "udp");
        assert_eq!(c.direction.as_deref(), Some("reverse"));
        assert_eq!(c.agent_address.as_deref(), Some("[::1]:5201"));
        assert_eq!(c.client_host.as_deref(), Some("vm"));
        assert_eq!(
            (c.receiver_bits_per_second, c.number("loss_percent")),
            (Some(1.5e8), Some(25.0))
        );
        assert_eq!((c.client_cpu_percent, c.agent_cpu_percent), (Some(10.0), Some(20.0)));
        assert_eq!(
            (c.client_mtu_bytes, c.number("p99_latency_us"), c.agent_host),
            (None, None, None)
        );
    }

    #[test]
    fn an_iperf3_error_document_is_refused_with_its_message() {
        let doc = json!({"start": {}, "end": {}, "error": "unable to connect to server"});
        match parse(doc).unwrap_err() {
            Error::Document(what) => assert!(what.contains("unable to connect"), "{what}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn figures_out_of_range_name_the_iperf3_field() {
        let doc = |end: Value, timesecs: f64| {
            json!({
                "start": {"timestamp": {"timesecs": timesecs}, "test_start": {"protocol": "TCP"}},
                "end": end,
            })
        };
        let refused = |d: Value| match parse(d).unwrap_err() {
            Error::Figure(bad) => bad,
            other => panic!("{other:?}"),
        };
        let ok = json!({"sum_received": {"bits_per_second": 1e9}, "sum_sent": {"bits_per_second": 1e9}});
        assert!(parse(doc(ok.clone(), 1.7e9)).is_ok());
        let negative = json!({"sum_received": {"bits_per_second": -1e9}});
        assert_eq!(refused(doc(negative, 1.7e9)).field, "end.sum_received.bits_per_second");
        let cpu = json!({"sum_received": {"bits_per_second": 1e9},
                         "cpu_utilization_percent": {"host_total": 1e308, "remote_total": 5.0}});
        assert_eq!(refused(doc(cpu, 1.7e9)).field, "end.cpu_utilization_percent.host_total");
        assert_eq!(refused(doc(ok, 9.2e18)).field, "start.timestamp.timesecs");
    }
}
