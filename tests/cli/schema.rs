//! The result document is a contract: documents written by an earlier
//! build (tests/fixtures/run-*.json, made by the build before the result
//! model was reorganized) read back into the model and serialize to the
//! same bytes, and every workload's part still reads as that workload's.

use std::path::PathBuf;

use nicbench::model::RunResult;
use nicbench::report::text::Text;
use nicbench::report::Reporter;
use nicbench::workload;

fn fixtures() -> Vec<(String, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("run-"))
        .map(|p| (p.display().to_string(), std::fs::read_to_string(&p).unwrap()))
        .collect();
    out.sort();
    assert!(out.len() >= 6, "fixtures missing in {}", dir.display());
    out
}

#[test]
fn fixture_documents_round_trip_byte_for_byte() {
    for (path, text) in fixtures() {
        let run: RunResult = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
        let again = serde_json::to_string_pretty(&run).unwrap();
        if let Some((n, (a, b))) = again.lines().zip(text.lines()).enumerate().find(|(_, (a, b))| a != b) {
            panic!(
                "{path} does not round-trip: line {}: wrote {a:?}, fixture has {b:?}",
                n + 1
            );
        }
        assert_eq!(again.trim_end().len(), text.trim_end().len(), "{path}: lengths differ");
    }
}

#[test]
fn each_workload_reads_its_own_part_of_a_fixture() {
    for (path, text) in fixtures() {
        let run: RunResult = serde_json::from_str(&text).unwrap();
        let kind = workload::results_of(&run.workload);
        let figure = kind.figure_of_merit(&run.result);
        assert!(figure.value > 0.0, "{path}: {} is {}", figure.metric, figure.value);
        let mut rendered = Vec::new();
        Text.render(&run, &mut rendered).unwrap();
        let rendered = String::from_utf8(rendered).unwrap();
        let expected = match run.workload.as_str() {
            "udp" => "UDP client->agent",
            "rr" => "transactions/s",
            "sweep" => "peak",
            _ => "[SUM] client->agent",
        };
        assert!(rendered.contains(expected), "{path}: no '{expected}' in\n{rendered}");
        // The workload's own figure, recomputed from the parts each end
        // reported, equals what the earlier build summed.
        let mut resummed = run.result.clone();
        resummed.sum.extras = Default::default();
        for f in [&mut resummed.sum.client_to_agent, &mut resummed.sum.agent_to_client]
            .into_iter()
            .flatten()
        {
            f.extras = Default::default();
        }
        for s in &mut resummed.streams {
            s.extras = Default::default();
        }
        kind.summarize(&mut resummed);
        let (ours, theirs) = (
            serde_json::to_string_pretty(&resummed).unwrap(),
            serde_json::to_string_pretty(&run.result).unwrap(),
        );
        if let Some((n, (a, b))) = ours.lines().zip(theirs.lines()).enumerate().find(|(_, (a, b))| a != b) {
            panic!(
                "{path}: the workload's totals differ at line {}: {a:?} vs the document's {b:?}",
                n + 1
            );
        }
    }
}

#[test]
fn the_text_report_fits_100_columns_and_keeps_every_figure() {
    for (path, text) in fixtures() {
        let run: RunResult = serde_json::from_str(&text).unwrap();
        let mut fitted = Vec::new();
        Text.render_fitted(&run, Some(100), &mut fitted).unwrap();
        let fitted = String::from_utf8(fitted).unwrap();
        for line in fitted.lines() {
            assert!(
                line.chars().count() <= 100,
                "{path}: {} columns: {line}",
                line.chars().count()
            );
        }
        // Wrapping moves words to new lines; it drops none.
        let mut full = Vec::new();
        Text.render_fitted(&run, None, &mut full).unwrap();
        let words = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        let full = String::from_utf8(full).unwrap();
        let (fitted_words, full_words) = (words(&fitted), words(&full));
        // The narrow table leaves out the byte columns of the streams.
        let dropped: Vec<_> = full_words.iter().filter(|w| !fitted_words.contains(w)).collect();
        assert!(
            dropped
                .iter()
                .all(|w| ["GB", "MB", "kB", "B"].contains(&w.as_str()) || w.parse::<f64>().is_ok()),
            "{path}: wrapping dropped {dropped:?}"
        );
    }
}
