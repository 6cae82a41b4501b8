//! Plans with a fan-out workload (`multicast`): the `receivers` axis runs
//! one case against the first N agents at once, in this process; each
//! receiver's run is saved with the case's tags and its own label, the
//! plan resumes such cases like any other, and bad axes are refused with
//! what to write instead.

use std::process::Output;

use serde_json::Value;

use crate::common::{nicbench, stderr, AgentProcess, BIN};
use crate::multicast::{memberships, unique_group};
use crate::plan::{exported_runs, write_plan as write};

/// `agents` as `[[agents]]` entries: (label, address).
fn agents_toml(agents: &[(&str, String)]) -> String {
    agents
        .iter()
        .map(|(label, address)| format!("[[agents]]\nlabel = \"{label}\"\naddress = \"{address}\"\n"))
        .collect()
}

fn tag<'a>(run: &'a Value, key: &str) -> &'a str {
    run["tags"][key]
        .as_str()
        .unwrap_or_else(|| panic!("no tag {key}: {}", run["tags"]))
}

/// Checks what a receivers=1 and a receivers=N case of plan `name` saved:
/// one run per receiver, each tagged with its label, the case and the
/// test they share, one of them the slowest; and returns the stdout.
fn assert_saved(out: &Output, db: &str, name: &str, labels: &[&str], counts: &[usize]) -> String {
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}\n{}", stderr(out));
    let runs = exported_runs(db, name);
    assert_eq!(
        runs.len(),
        counts.iter().sum::<usize>(),
        "one run per receiver per case: {runs:#?}"
    );
    for n in counts {
        let case = format!("multicast receivers={n}");
        let mine: Vec<&Value> = runs.iter().filter(|r| tag(r, "case") == case).collect();
        let mut got: Vec<&str> = mine.iter().map(|r| tag(r, "agent")).collect();
        got.sort();
        assert_eq!(got, labels[..*n], "{case}: the first {n} agents, by label");
        for r in &mine {
            assert_eq!(tag(r, "receivers"), n.to_string());
            assert_eq!(tag(r, "fanout_run"), tag(mine[0], "fanout_run"), "one test per case");
            assert_eq!(r["document"]["workload"], "multicast");
            assert_eq!(r["complete"], true, "{r}");
        }
        assert_eq!(mine.iter().filter(|r| tag(r, "slowest") == "true").count(), 1, "{case}");
        // Each case's line goes to stderr, with the progress.
        let progress = stderr(out);
        let line = progress
            .lines()
            .find(|l| l.contains(&format!("] {case}: ")))
            .unwrap_or_else(|| panic!("no line for {case}:\n{progress}"));
        let said = match n {
            1 => format!("receiver {}", labels[0]),
            n => format!(" of {n} receivers"),
        };
        assert!(line.contains(&said) && line.contains("bit/s"), "{line}");
    }
    text
}

/// Three agents on loopback, `receivers = [1, 3]`: two cases, four runs;
/// the plan's `repeat` is not a fan-out case's option (one test each);
/// the command line each run keeps names every receiver; resuming the plan
/// run skips both cases and saves nothing more; no membership is left on
/// lo.
#[test]
fn a_receivers_axis_drives_the_first_n_agents_at_once_and_saves_a_run_per_receiver() {
    let agents: Vec<AgentProcess> = (0..3).map(|_| AgentProcess::start(&[])).collect();
    let addresses: Vec<String> = agents.iter().map(|a| format!("127.0.0.1:{}", a.port)).collect();
    let labels = ["b", "c", "d"];
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db").display().to_string();
    let group = unique_group();
    let plan = write(
        dir.path(),
        "fan.toml",
        &format!(
            "name = \"fan\"\n[defaults]\nduration = \"0.5s\"\nrepeat = 3\n{}\
             [workloads.multicast]\noptions = [\"-g\", \"{group}\", \"-b\", \"20M\", \"-l\", \"1000\", \"--join-wait\", \"300ms\"]\n\
             [matrix]\nworkload = [\"multicast\"]\nreceivers = [1, 3]\n\
             [[report.tables]]\ntitle = \"Receive rate\"\nrows = \"tag:receivers\"\ncols = \"tag:agent\"\nmetric = \"throughput\"\n",
            agents_toml(&labels.iter().copied().zip(addresses.clone()).collect::<Vec<_>>())
        ),
    );
    let dry = nicbench(&["run", &plan, "--dry-run", "--db", &db]);
    let dry_text = String::from_utf8_lossy(&dry.stdout);
    assert!(dry.status.success(), "{dry_text}\n{}", stderr(&dry));
    assert!(
        dry_text.contains(&format!(
            "nicbench multicast {} {} {} -t 0.5s",
            addresses[0], addresses[1], addresses[2]
        )),
        "{dry_text}"
    );
    assert!(!dry_text.contains("--repeat"), "{dry_text}");
    assert!(
        dry_text.contains(
            "multicast cases run one test each: [defaults] repeat, confidence and iterations apply to the other cases"
        ),
        "the dry run says why repeat = 3 does not apply: {dry_text}"
    );
    for label in labels {
        assert!(
            dry_text.contains(&format!("agent {label} (")),
            "every receiver is checked: {dry_text}"
        );
    }

    let out = nicbench(&["run", &plan, "--db", &db, "--no-shuffle"]);
    let text = assert_saved(&out, &db, "fan", &labels, &[1, 3]);
    assert!(
        text.contains("2 of 2 cases done (2 measured now, 0 earlier), 0 failed"),
        "{text}"
    );
    // The table reads each receiver's run in its own column.
    let table = text.split("Receive rate").nth(1).expect("the plan's table");
    assert!(
        table.contains('b') && table.contains('c') && table.contains('d'),
        "{table}"
    );
    for r in exported_runs(&db, "fan") {
        let line = r["command_line"].as_str().unwrap_or_default().to_string();
        let wanted = match tag(&r, "receivers") {
            "1" => format!("multicast {} -t", addresses[0]),
            _ => format!("multicast {} {} {} -t", addresses[0], addresses[1], addresses[2]),
        };
        assert!(
            line.contains(&wanted) && line.contains("--tag 'case=multicast receivers="),
            "{line}"
        );
    }
    let address = group.split(':').next().unwrap();
    assert!(!memberships("lo").contains(address), "{}", memberships("lo"));

    let plan_run = text
        .lines()
        .next()
        .and_then(|l| l.split(", run ").nth(1))
        .and_then(|l| l.split(':').next())
        .expect("the plan run's id on the first line")
        .to_string();
    let again = nicbench(&["run", &plan, "--db", &db, "--resume", &plan_run]);
    let again_text = String::from_utf8_lossy(&again.stdout);
    assert!(again.status.success(), "{again_text}\n{}", stderr(&again));
    assert!(again_text.contains("2 finished earlier and skipped"), "{again_text}");
    assert_eq!(exported_runs(&db, "fan").len(), 4, "nothing measured twice");
}

/// The axis refused where it cannot mean anything, each with what to
/// write instead; a case whose receivers hold different keys is refused
/// before anything connects.
#[test]
fn a_receivers_axis_that_cannot_apply_is_refused_with_what_to_write() {
    let dir = tempfile::tempdir().unwrap();
    let two = agents_toml(&[("b", "127.0.0.1:1".into()), ("c", "127.0.0.1:2".into())]);
    for (matrix, said) in [
        (
            "workload = [\"multicast\"]\nreceivers = [3]\n",
            "receivers = 3: expected 1 to 2",
        ),
        (
            "workload = [\"multicast\"]\nreceivers = [0]\n",
            "receivers = 0: expected 1 to 2",
        ),
        (
            "workload = [\"multicast\"]\nagent = [\"c\"]\nreceivers = [2]\n",
            "receivers = 2: expected 1 to 1",
        ),
        (
            "workload = [\"tcp\"]\nreceivers = [1]\n",
            "no workload of the matrix drives several agents at once; the axis is for multicast",
        ),
        (
            "workload = [\"tcp\"]\n[[matrix.include]]\nworkload = \"multicast\"\nagent = \"b\"\n",
            "give receivers = N",
        ),
        (
            "workload = [\"tcp\"]\n[[matrix.include]]\nworkload = \"udp\"\nreceivers = 2\n",
            "the receivers axis is for multicast",
        ),
    ] {
        let plan = write(dir.path(), "bad.toml", &format!("{two}[matrix]\n{matrix}"));
        let out = nicbench(&["run", &plan, "--dry-run"]);
        assert_eq!(out.status.code(), Some(2), "{matrix}: {}", stderr(&out));
        assert!(stderr(&out).contains(said), "{matrix}: {}", stderr(&out));
    }
    let keys = "[[agents]]\nlabel = \"b\"\naddress = \"127.0.0.1:1\"\npsk_file = \"/k1\"\n\
                [[agents]]\nlabel = \"c\"\naddress = \"127.0.0.1:2\"\npsk_file = \"/k2\"\n";
    let plan = write(
        dir.path(),
        "keys.toml",
        &format!("{keys}[matrix]\nworkload = [\"multicast\"]\n[workloads.multicast]\noptions = [\"-g\", \"239.9.9.9:5000\"]\n"),
    );
    let out = nicbench(&["run", &plan, "--dry-run"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("agents b and c name different psk_file"),
        "{}",
        stderr(&out)
    );
}

/// In a lab on a switch, a plan run from host a drives b, c and d's agents
/// (reached by host name, the lab's agent port): receivers = [2, 3], five
/// runs, each receiver's counts within what a sent.
#[test]
fn in_a_switch_lab_a_plan_runs_multicast_to_two_then_three_hosts() {
    require_lab!();
    let lab = crate::common::lab_builder().switch().hosts(4).build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db").display().to_string();
    let group = unique_group();
    let labels = ["b", "c", "d"];
    let plan = write(
        dir.path(),
        "lab.toml",
        &format!(
            "name = \"labfan\"\n[defaults]\nduration = \"1s\"\n{}\
             [workloads.multicast]\noptions = [\"-g\", \"{group}\", \"-b\", \"20M\", \"--join-wait\", \"500ms\"]\n\
             [matrix]\nworkload = [\"multicast\"]\nreceivers = [2, 3]\n",
            agents_toml(&labels.iter().map(|l| (*l, l.to_string())).collect::<Vec<_>>())
        ),
    );
    let mut run = lab.command("a", BIN);
    run.args(["run", &plan, "--db", &db, "--no-shuffle"]);
    let out = crate::common::run_captured(&mut run, "nicbench run in the lab");
    assert_saved(&out, &db, "labfan", &labels, &[2, 3]);
    let runs = exported_runs(&db, "labfan");
    for r in &runs {
        // One sender for every receiver of a case; each receiver's count
        // adds up against it.
        let udp = &r["document"]["sum"]["udp"];
        let sent = udp["sent_datagrams"].as_u64().expect("a sender's count");
        let (received, lost) = (
            udp["received_datagrams"].as_u64().unwrap(),
            udp["lost_datagrams"].as_u64().unwrap(),
        );
        assert!(sent > 0, "{r}");
        assert_eq!(received + lost, sent, "{}: {udp}", tag(r, "agent"));
        let same_test = runs.iter().filter(|o| tag(o, "fanout_run") == tag(r, "fanout_run"));
        for other in same_test {
            assert_eq!(
                other["document"]["sum"]["udp"]["sent_datagrams"], sent,
                "one sender per case"
            );
        }
        assert_eq!(
            r["document"]["agent"]["address"].as_str().unwrap().split(':').next(),
            Some(lab.addr(tag(r, "agent")).to_string().as_str()),
            "each run is its own receiver's"
        );
    }
}
