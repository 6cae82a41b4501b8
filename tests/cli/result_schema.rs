//! The result document against its JSON Schema
//! (docs/schema/nicbench.run-1.schema.json, linked from docs/SCHEMA.md):
//! the committed fixtures of every workload and documents of real runs
//! against a loopback agent must validate, and a document with a renamed,
//! unknown or mistyped field must not (so the check can fail).

use std::path::PathBuf;

use serde_json::Value;

use super::common::*;

pub(crate) fn schema() -> jsonschema::Validator {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/schema/nicbench.run-1.schema.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let schema: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if let Err(e) = jsonschema::meta::validate(&schema) {
        panic!("{} is not a valid JSON Schema: {e}", path.display());
    }
    jsonschema::validator_for(&schema).unwrap()
}

/// Panics with every violation, each with its place in the document.
pub(crate) fn assert_valid(validator: &jsonschema::Validator, document: &Value, what: &str) {
    let errors: Vec<String> = validator
        .iter_errors(document)
        .map(|e| format!("  at {}: {e}", e.instance_path))
        .collect();
    assert!(
        errors.is_empty(),
        "{what} does not match docs/schema/nicbench.run-1.schema.json:\n{}",
        errors.join("\n")
    );
}

fn fixtures() -> Vec<(String, Value)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut out: Vec<(String, Value)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("run-"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p.display().to_string(), serde_json::from_str(&text).unwrap())
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn fixtures_of_every_workload_match_the_schema() {
    let validator = schema();
    let documents = fixtures();
    for workload in ["tcp", "udp", "rr", "sweep"] {
        assert!(
            documents.iter().any(|(_, d)| d["workload"] == workload),
            "no fixture of {workload}"
        );
    }
    for (path, document) in &documents {
        assert_valid(&validator, document, path);
    }
}

#[test]
fn real_runs_against_a_loopback_agent_match_the_schema() {
    let validator = schema();
    let agent = AgentProcess::start(&[]);
    let last_core = (std::thread::available_parallelism().unwrap().get() - 1).to_string();
    let runs: Vec<(&str, Vec<&str>)> = vec![
        ("tcp", vec!["-t", "0.5", "-O", "0.2", "-P", "2", "--link-speed", "10G"]),
        (
            "tcp",
            vec![
                "-t",
                "0.3",
                "--bidir",
                "--zerocopy",
                "--discard",
                "-A",
                "0",
                "--remote-affinity",
                &last_core,
            ],
        ),
        ("tcp", vec!["-n", "1M", "--repeat", "2"]),
        ("udp", vec!["-t", "0.5", "-b", "20M", "--bidir"]),
        ("udp", vec!["-t", "0.5", "-b", "max", "-R"]),
        ("rr", vec!["-t", "0.5", "-P", "2"]),
        ("rr", vec!["-t", "0.5", "--proto", "udp", "--burst", "2"]),
        (
            "sweep",
            vec!["--max", "4K", "--point-time", "5ms", "--link-speed", "1G"],
        ),
        (
            "files",
            vec![
                "--generate",
                "20x4K",
                "--raw-time",
                "0.2s",
                "--compress",
                "zstd",
                "-P",
                "2",
            ],
        ),
        ("files", vec!["--generate", "3x64K", "--raw-time", "0", "--reverse"]),
    ];
    for (workload, args) in runs {
        let document = agent.run_json(workload, &args);
        assert_valid(&validator, &document, &format!("nicbench {workload} {args:?}"));
    }
}

#[test]
fn documents_that_break_the_contract_are_refused() {
    let validator = schema();
    let (path, good) = fixtures().into_iter().find(|(_, d)| d["workload"] == "udp").unwrap();
    type Breakage = Box<dyn Fn(&mut Value)>;
    let broken: Vec<(&str, Breakage)> = vec![
        (
            "a field renamed",
            Box::new(|d| {
                let bytes = d["sum"]["receiver"].as_object_mut().unwrap().remove("bytes").unwrap();
                d["sum"]["receiver"]["byte_count"] = bytes;
            }),
        ),
        (
            "an undocumented field",
            Box::new(|d| d["streams"][0]["sender"]["surprise"] = 1.into()),
        ),
        (
            "a number as a string",
            Box::new(|d| d["streams"][0]["udp"]["lost_datagrams"] = "7".into()),
        ),
        (
            "another schema version",
            Box::new(|d| d["schema"] = "nicbench.run/2".into()),
        ),
        ("an unknown verdict", Box::new(|d| d["verdict"]["kind"] = "slow".into())),
        (
            "a required field missing",
            Box::new(|d| {
                d["cpu"]["agent"]
                    .as_object_mut()
                    .unwrap()
                    .remove("service_demand_us_per_kb");
            }),
        ),
    ];
    for (what, breaks) in broken {
        let mut document = good.clone();
        breaks(&mut document);
        assert!(!validator.is_valid(&document), "{path} with {what} still validates");
    }
}
