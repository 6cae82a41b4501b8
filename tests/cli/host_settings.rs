//! Host settings between plan cases beyond the MTU (offloads, rings,
//! coalescing, the root qdisc): applied on both ends in the lab, read back
//! from the facts recorded with each run, refused by an agent that does not
//! allow host changes, and restored on both ends when the plan ends (also
//! after failed cases). Bad values are refused with the line and what is
//! allowed.

use std::io::Write;

use crate::common::{clean_env, nicbench, stderr, AgentProcess, BIN};

fn write_plan(dir: &std::path::Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::File::create(&path)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    path.display().to_string()
}

/// The facts of `host`'s interface toward `peer`, as `nicbench host` reads
/// them inside the lab namespace.
fn interface_facts(lab: &nicbench::lab::Lab, host: &str, peer: &str) -> serde_json::Value {
    let mut command = lab.command(host, BIN);
    let out = clean_env(&mut command)
        .args(["host", "--peer", peer, "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let facts: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    facts["interface"].clone()
}

/// What a plan may change: the offloads it names and the root qdisc.
fn settings_of(nic: &serde_json::Value) -> (serde_json::Value, serde_json::Value, serde_json::Value) {
    (
        nic["offloads"]["tso"].clone(),
        nic["offloads"]["gro"].clone(),
        nic["qdisc"].clone(),
    )
}

#[test]
fn offload_and_qdisc_cases_set_both_ends_and_both_are_restored_after_failed_cases() {
    require_lab!();
    let lab = crate::common::lab_builder().no_agents().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let psk = dir.path().join("psk");
    std::fs::write(&psk, "a key of at least sixteen bytes, for the host settings test\n").unwrap();
    let psk = psk.display().to_string();
    let (a, b) = (lab.addr("a").to_string(), lab.addr("b").to_string());
    let before_a = settings_of(&interface_facts(&lab, "a", &b));
    let before_b = settings_of(&interface_facts(&lab, "b", &a));
    // The lab's veths start with TSO on and no queue; every case differs
    // from that in at least its qdisc.
    assert_eq!(before_a.2, "noqueue", "{before_a:?}");
    let allowing = AgentProcess::start_with(lab.command("b", BIN), &b, &["--psk-file", &psk, "--allow-host-changes"]);
    let plain = AgentProcess::start_with(lab.command("b", BIN), &b, &["--psk-file", &psk]);
    let db = dir.path().join("r.db").display().to_string();
    let plan = write_plan(
        dir.path(),
        "host.toml",
        &format!(
            "name = \"host-settings-test\"\n[defaults]\nduration = \"0.3s\"\nallow_host_changes = true\n\
             [[agents]]\nlabel = \"allows\"\naddress = \"{b}:{}\"\npsk_file = \"{psk}\"\n\
             [[agents]]\nlabel = \"refuses\"\naddress = \"{b}:{}\"\npsk_file = \"{psk}\"\n\
             [matrix]\nworkload = [\"tcp\"]\noffloads = [\"tso=off,gro=off\", \"tso=on,gro=on\"]\n\
             qdisc = [\"pfifo\", \"pfifo_fast\"]\n\
             [[matrix.include]]\nagent = \"allows\"\nrings = \"rx=256\"\n\
             [[report.tables]]\nrows = \"tag:agent,tag:offloads\"\ncols = \"tag:qdisc\"\n",
            allowing.port, plain.port
        ),
    );
    let mut run = lab.command("a", BIN);
    run.args(["run", &plan, "--db", &db, "--no-shuffle"]);
    let out = crate::common::run_captured(&mut run, "nicbench run in the lab");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(5), "{text}\n{}", stderr(&out));
    // In the file's order: the four cells of `allows` run; b's interface is
    // then at tso=on,gro=on and pfifo_fast. Of the cells of `refuses` (an
    // agent without --allow-host-changes) only the one asking for exactly
    // that runs; the others fail and the plan goes on. The included cell
    // asks for ring sizes, which veth does not have.
    assert!(
        text.contains("5 of 9 cases done") && text.contains("4 failed"),
        "{text}"
    );
    assert!(
        text.contains(
            "FAILED tcp agent=refuses offloads=tso=off,gro=off qdisc=pfifo: agent refuses: cannot set offloads \
             tso=off,gro=off: the agent refused: this agent does not change host settings: start it with \
             --allow-host-changes"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "FAILED tcp agent=refuses offloads=tso=on,gro=on qdisc=pfifo: agent refuses: cannot set qdisc pfifo"
        ),
        "{text}"
    );
    assert!(
        text.contains("FAILED tcp agent=allows offloads=tso=off,gro=off rings=rx=256 qdisc=pfifo: local ")
            && text.contains(": the driver veth does not support ring sizes"),
        "{text}"
    );
    assert!(!text.contains("NOT RESTORED"), "{text}");
    // Both ends are back as they were.
    assert_eq!(settings_of(&interface_facts(&lab, "a", &b)), before_a);
    assert_eq!(settings_of(&interface_facts(&lab, "b", &a)), before_b);
    // Each measured case ran with its settings on both ends (the facts
    // recorded with the run).
    let out = nicbench(&[
        "export",
        "--db",
        &db,
        "--tag",
        "plan=host-settings-test",
        "--format",
        "json",
    ]);
    let runs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 5, "{runs:#?}");
    for r in runs {
        let on = r["tags"]["offloads"].as_str().unwrap() == "tso=on,gro=on";
        let qdisc = r["tags"]["qdisc"].as_str().unwrap();
        let id = r["id"].as_i64().unwrap().to_string();
        let doc = crate::common::nicbench_json(&["show", &id, "--db", &db, "--json"]);
        for side in ["client", "agent"] {
            let nic = &doc[side]["facts"]["interface"];
            assert_eq!(
                settings_of(nic),
                (on.into(), on.into(), qdisc.into()),
                "{side} side of run {id} ({})",
                r["tags"]["case"]
            );
        }
    }
    assert!(!dir
        .path()
        .join("plans")
        .read_dir()
        .unwrap()
        .any(|d| d.unwrap().path().join("restore.json").exists()));
}

#[test]
fn bad_host_settings_are_refused_before_anything_runs_with_the_line_and_what_is_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let head = "[[agents]]\nlabel = \"lo\"\naddress = \"127.0.0.1:1\"\n[matrix]\nworkload = [\"tcp\"]\n";
    for (extra, wanted) in [
        (
            "offloads = [\"tso=off\", \"tcp-segmentation-offload=off\"]\n",
            "line 6: [matrix] offloads = \"tcp-segmentation-offload=off\": offloads: unknown key \
             'tcp-segmentation-offload': expected one of tso, gso, gro, lro, sg, rx-checksum, tx-checksum",
        ),
        (
            "rings = [\"rx=-256,tx=256\"]\n",
            "line 6: [matrix] rings = \"rx=-256,tx=256\": rx=-256: expected a whole number of descriptors from 1 to 65536",
        ),
        (
            "qdisc = [\"fq\",\n  \"fifo\"]\n",
            "line 7: [matrix] qdisc = \"fifo\": unknown qdisc kind 'fifo': expected one of bfifo, cake",
        ),
        (
            "coalesce = [\"adaptive-rx=yes\"]\n",
            "[matrix] coalesce = \"adaptive-rx=yes\": adaptive-rx=yes: expected on or off",
        ),
    ] {
        let plan = write_plan(dir.path(), "bad.toml", &format!("{head}{extra}"));
        let out = nicbench(&["run", &plan, "--dry-run"]);
        assert_eq!(out.status.code(), Some(2), "{extra}: {}", stderr(&out));
        assert!(stderr(&out).contains(wanted), "{extra}: {}", stderr(&out));
    }
}
