//! The container image and the Kubernetes manifests, checked for real:
//! contrib/container/build.sh builds the image from this build's binary
//! with podman, the image's agent runs in a lab host's network namespace
//! and serves a test from another host; the manifests name the image
//! build.sh tags; contrib/kubernetes/validate.sh checks them against the
//! Kubernetes API's schemas (offline).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;

use super::common::*;

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn build_script() -> PathBuf {
    repo().join("contrib/container/build.sh")
}

/// podman with the repository's settings (runc, no raised rlimits), as
/// build.sh and docs/KUBERNETES.md run it; nothing in /etc is changed.
fn podman() -> Command {
    let mut command = Command::new("podman");
    command.env("CONTAINERS_CONF", repo().join("contrib/container/containers.conf"));
    command
}

/// Ok when podman and runc are here and podman answers with these settings.
fn podman_usable() -> Result<(), String> {
    tool("runc", &["--version"], "apt-get install runc")?;
    let out = podman()
        .args(["info", "--format", "{{.Host.OCIRuntime.Name}}"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("podman is not runnable here ({e}): apt-get install podman runc"))?;
    if !out.status.success() {
        return Err(format!("`podman info` failed: {}", stderr(&out).trim()));
    }
    Ok(())
}

/// A name no other test (nor a parallel run of this one) uses.
fn unique(what: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!(
        "nicbench-test-{what}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The container and the image a test made, removed when dropped: on
/// success and when the test panics, container first.
struct PodmanLeftovers {
    container: String,
    image: String,
}

impl Drop for PodmanLeftovers {
    fn drop(&mut self) {
        let remove = |args: &[&str]| match podman().args(args).stdin(Stdio::null()).output() {
            Ok(out) if out.status.success() => {}
            Ok(out) => eprintln!("podman {}: {}", args.join(" "), stderr(&out).trim()),
            Err(e) => eprintln!("podman {}: {e}", args.join(" ")),
        };
        remove(&["rm", "--force", "--ignore", "--time", "0", &self.container]);
        remove(&["rmi", "--ignore", &self.image]);
    }
}

fn text(out: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        stderr(out)
    )
}

fn bytes(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("{v} is no byte count"))
}

#[test]
fn the_image_built_from_this_binary_serves_a_test_from_a_lab_host() {
    require_lab!();
    require!(podman_usable());
    let lab = lab_builder().no_agents().build().expect("build the lab");
    let outdir = tempfile::tempdir().unwrap();
    // A name with a registry part is tagged as given: not the developer's
    // nicbench:VERSION, and no other run's.
    let image = format!("localhost/{}:{VERSION}", unique("image"));
    let container = unique("agent");
    let hostname = unique("host");
    let _leftovers = PodmanLeftovers {
        container: container.clone(),
        image: image.clone(),
    };

    let out = run_captured(
        Command::new(build_script()).args([BIN, outdir.path().to_str().unwrap(), image.as_str()]),
        "build.sh",
    );
    assert!(out.status.success(), "build.sh failed\n{}", text(&out));
    let tar = outdir.path().join(format!("nicbench-{VERSION}-image.tar"));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!("wrote {}", tar.display())),
        "{}",
        text(&out)
    );
    assert!(tar.metadata().unwrap().len() > 0);

    // The agent in the container, in host b's network namespace; the
    // arguments after the image replace its CMD (`serve`). AgentProcess
    // adds `serve -p 0 -B 0.0.0.0 -v` and waits for the port it announces.
    let mut run = podman();
    run.args(["run", "--rm", "--runtime", "runc"])
        .args(["--name", container.as_str(), "--hostname", hostname.as_str()])
        .arg(format!("--network=ns:/run/netns/{}", lab.netns("b")))
        .arg(image.as_str());
    let agent = AgentProcess::start_with(run, "0.0.0.0", &[]);

    let port = agent.port_arg();
    let out = run_captured(
        lab.command("a", BIN)
            .args(["tcp", "b", "-p", &port, "-t", "1", "--json", "--no-save"]),
        "nicbench tcp from host a",
    );
    assert!(
        out.status.success(),
        "the test against the container's agent failed\n{}\nagent log:\n{}",
        text(&out),
        agent.logs()
    );
    let result: Value = serde_json::from_slice(&out.stdout).expect("valid JSON");

    // The agent that answered is the image's: the container's hostname and
    // the image's os-release, in b's namespace, this build's version.
    let facts = &result["agent"]["facts"];
    assert_eq!(facts["hostname"], hostname.as_str(), "{facts}");
    assert_eq!(facts["os"], format!("nicbench {VERSION} container image"), "{facts}");
    assert_eq!(facts["nicbench_version"], VERSION, "{facts}");
    assert_eq!(
        result["agent"]["address"],
        format!("{}:{port}", lab.addr("b")),
        "the agent answered at b's address"
    );

    for stream in result["streams"].as_array().unwrap() {
        assert_eq!(stream["sender"]["bytes"], stream["receiver"]["bytes"], "{stream}");
        assert!(bytes(&stream["sender"]["bytes"]) > 0, "{stream}");
    }
    assert_eq!(
        bytes(&result["sum"]["sender"]["bytes"]),
        bytes(&result["sum"]["receiver"]["bytes"])
    );
    // The agent may log the end just after the client has its result.
    agent.wait_for_log("test done");
}

/// The manifests say `image: nicbench:VERSION`; build.sh must tag that
/// name (it reads VERSION from Cargo.toml), or the nodes find no image.
#[test]
fn the_manifests_name_the_image_build_sh_tags() {
    let expected = format!("nicbench:{VERSION}");
    let out = Command::new(build_script())
        .arg("--image-name")
        .stdin(Stdio::null())
        .output()
        .expect("run build.sh");
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), expected);

    let mut named = 0;
    for entry in std::fs::read_dir(repo().join("contrib/kubernetes")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            if let Some(image) = line.trim().strip_prefix("image:") {
                assert_eq!(image.trim(), expected, "{}", path.display());
                named += 1;
            }
        }
    }
    assert_eq!(named, 3, "the two agent DaemonSets and the mesh Job name the image");
}

/// validate.sh checks every manifest against the Kubernetes API's schemas
/// (the ServiceMonitor against its CRD's), offline, and really rejects a
/// misspelt field and a wrong type.
#[test]
fn the_manifests_are_valid_against_the_kubernetes_api_schemas() {
    let validate = |files: &[PathBuf]| {
        run_captured(
            Command::new(repo().join("contrib/kubernetes/validate.sh")).args(files),
            "validate.sh",
        )
    };
    let out = validate(&[]);
    if out.status.code() == Some(3) {
        skip_or_fail(&format!("a schema validator is missing: {}", stderr(&out).trim()));
        return;
    }
    assert!(out.status.success(), "validate.sh failed\n{}", text(&out));
    let report = String::from_utf8_lossy(&out.stdout);
    for kind in [
        "daemonset-hostnetwork.yaml DaemonSet/",
        "daemonset-pod-network.yaml DaemonSet/",
        "mesh-job.yaml Job/",
        "namespace-secret.yaml Namespace/",
        "namespace-secret.yaml Secret/",
        "services.yaml Service/",
        "servicemonitor.yaml ServiceMonitor/",
    ] {
        assert!(
            report.contains(&format!("valid   {kind}")),
            "no '{kind}' checked:\n{report}"
        );
    }
    assert!(report.contains("\n0 of 8 documents in 6 files invalid"), "{report}");

    let dir = tempfile::tempdir().unwrap();
    let broken = |name: &str, from: &str, to: &str| {
        let original = std::fs::read_to_string(repo().join("contrib/kubernetes").join(name)).unwrap();
        assert!(original.contains(from), "{name} has no '{from}'");
        let path = dir.path().join(name);
        std::fs::write(&path, original.replace(from, to)).unwrap();
        path
    };
    let out = validate(&[
        broken("daemonset-hostnetwork.yaml", "hostNetwork: true", "hostNetwrk: true"),
        broken("servicemonitor.yaml", "port: metrics", "port: 9310"),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("'hostNetwrk' was unexpected"), "{report}");
    assert!(report.contains("endpoints/0/port must be string"), "{report}");
}
