//! `nicbench demo`: the README's first command runs the standard set end to end.

use super::common::*;

#[test]
fn demo_runs_the_standard_set_and_prints_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("demo.html");
    let out = nicbench(&["demo", "-t", "0.3", "--report", page.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    // The demo ends by naming its report, which holds every test's command.
    assert!(text.contains(&format!("report: {}", page.display())), "{text}");
    let html = std::fs::read_to_string(&page).expect("the demo wrote its report");
    assert!(
        html.contains("<svg") && html.contains("--max 1M --point-time 10ms"),
        "report lacks charts or commands"
    );
    let summary = &text[text.find("Summary").expect("a summary table")..];
    for row in [
        "TCP, 1 stream",
        "TCP, 4 streams",
        "TCP, reverse",
        "TCP, both ways",
        "Sweep",
        "UDP",
        "request/response",
    ] {
        assert!(summary.contains(row), "missing {row}: {summary}");
    }
    assert!(
        summary.contains("transactions/s") && summary.contains("us/KB"),
        "{summary}"
    );
}

#[test]
fn demo_json_is_one_array_of_run_documents() {
    let out = nicbench(&["demo", "-t", "0.3", "--json", "--no-report"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let runs: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let runs = runs.as_array().unwrap();
    assert!(runs.len() >= 8);
    assert!(runs.iter().all(|r| r["schema"] == "nicbench.run/1"));
}
