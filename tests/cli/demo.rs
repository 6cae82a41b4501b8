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
    // The report leads with the same summary, row for row, and its tables
    // and bars have one row per test, not one "tcp" row pooling five.
    let lead = &html[html
        .find("<table class=\"lead\">")
        .expect("the summary table in the report")..];
    let lead = &lead[..lead.find("</table>").unwrap()];
    let test_rows: Vec<&str> = summary.lines().skip(2).take_while(|l| !l.trim().is_empty()).collect();
    assert_eq!(lead.matches("<tr>").count(), test_rows.len() + 1, "{lead}");
    for line in test_rows {
        // Columns are as wide as their widest cell, two spaces apart; a
        // label has single spaces only.
        let (label, rest) = line.split_once("  ").unwrap_or((line, ""));
        let label = label.trim();
        let cell = format!("<th scope=\"row\">{label}</th>");
        assert!(lead.contains(&cell), "{label} not in the report's summary");
        let figure = rest.split_whitespace().take(2).collect::<Vec<_>>().join(" ");
        assert!(
            lead.contains(&format!("<td class=\"num\">{figure}")),
            "{figure} of {label}: {lead}"
        );
    }
    let compare = &html[html.find("class=\"sortable compare\"").expect("a comparison table")..];
    assert!(
        compare.contains("<th scope=\"row\">TCP, 4 streams</th>")
            && compare.contains("<th scope=\"row\">TCP, reverse</th>"),
        "tests pooled into workloads"
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
