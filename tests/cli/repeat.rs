//! Repetitions and stopping rules (`--repeat`, `--confidence`) on `tcp`.

use super::common::*;
use serde_json::Value;

fn receiver_bps(trial: &Value) -> f64 {
    trial["sum"]["receiver"]["bits_per_second"].as_f64().unwrap()
}

#[test]
fn repeat_three_pick_best_reports_the_best_and_keeps_all() {
    let agent = AgentProcess::start(&[]);
    let out = nicbench(&[
        "tcp",
        "127.0.0.1",
        "-p",
        &agent.port_arg(),
        "-t",
        "0.3",
        "--repeat",
        "3",
        "--pick",
        "best",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let run: Value = serde_json::from_slice(&out.stdout).unwrap();
    let trials = run["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 3);
    let numbers: Vec<u64> = trials.iter().map(|t| t["trial"].as_u64().unwrap()).collect();
    assert_eq!(numbers, vec![1, 2, 3]);
    let best = trials.iter().map(receiver_bps).fold(f64::MIN, f64::max);
    let worst = trials.iter().map(receiver_bps).fold(f64::MAX, f64::min);
    assert_eq!(receiver_bps(&run), best);
    let r = &run["repetition"];
    assert_eq!(r["policy"]["policy"], "repeat");
    assert_eq!(r["policy"]["pick"], "best");
    assert_eq!(r["reported_value"].as_f64().unwrap(), best);
    assert_eq!(r["max"].as_f64().unwrap(), best);
    assert_eq!(r["min"].as_f64().unwrap(), worst);
    assert_eq!(r["values"].as_array().unwrap().len(), 3);
    let picked = r["picked_trial"].as_u64().unwrap() as usize;
    assert_eq!(receiver_bps(&trials[picked - 1]), best);
    assert!(stderr(&out).contains("trial 3/3"), "{}", stderr(&out));
}

#[test]
fn confidence_keeps_raw_trials_within_the_iteration_bounds() {
    let agent = AgentProcess::start(&[]);
    let run = agent.run_json("tcp", &["-t", "0.3", "--confidence", "99,5", "--iterations", "4,2"]);
    let trials = run["trials"].as_array().unwrap();
    assert!((2..=4).contains(&trials.len()), "{} trials", trials.len());
    let r = &run["repetition"];
    assert_eq!(r["policy"]["policy"], "confidence");
    let values: Vec<f64> = trials.iter().map(receiver_bps).collect();
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    assert!((r["reported_value"].as_f64().unwrap() - mean).abs() <= 1e-6 * mean);
    let interval = &r["interval"];
    assert!(interval["low"].as_f64().unwrap() <= mean && mean <= interval["high"].as_f64().unwrap());
    let met = r["width_met"].as_bool().unwrap();
    let width = interval["width_percent"].as_f64().unwrap();
    // Stopping early needs the width; running to MAX means it was not met.
    if trials.len() < 4 {
        assert!(met && width <= 5.0, "{r}");
    } else {
        assert_eq!(met, width <= 5.0, "{r}");
    }
}

#[test]
fn reaching_max_without_the_width_is_said_plainly() {
    let agent = AgentProcess::start(&[]);
    // No two real trials agree within 0.001%: MAX is always reached.
    let out = nicbench(&[
        "tcp",
        "127.0.0.1",
        "-p",
        &agent.port_arg(),
        "-t",
        "0.3",
        "--confidence",
        "99,0.001",
        "--iterations",
        "3,2",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("CONFIDENCE NOT MET: after 3 of at most 3 trials"),
        "{text}"
    );
    assert!(text.contains("% of the mean"), "{text}");
    assert!(text.contains("Repetitions: 3 trials"), "{text}");
    assert!(stderr(&out).contains("maximum reached"), "{}", stderr(&out));
}

#[test]
fn bad_repetition_options_are_refused() {
    for args in [
        &["--iterations", "2,5"][..],
        &["--confidence", "120,5"][..],
        &["--repeat", "0"][..],
        &["--repeat", "3", "--confidence", "99,5"][..],
    ] {
        let out = nicbench(&[&["tcp", "127.0.0.1", "-t", "1"][..], args].concat());
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    }
}
