//! contrib/kubernetes: every manifest parses as YAML and holds what
//! docs/KUBERNETES.md promises: host networking for the node agents, the
//! PSK Secret mounted where --psk-file looks, the agent's ports, probes,
//! resources, and a mesh Job over the headless Service's DNS name. Nothing
//! here talks to a cluster (there is none on this machine).

use std::path::{Path, PathBuf};

use clap::Parser;
use yaml_rust2::{Yaml, YamlLoader};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib/kubernetes")
}

/// Every document of every manifest, with its file name.
fn documents() -> Vec<(String, Yaml)> {
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 6, "{files:?}");
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let docs = YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for doc in docs {
            out.push((path.file_name().unwrap().to_string_lossy().into_owned(), doc));
        }
    }
    out
}

fn find<'a>(docs: &'a [(String, Yaml)], file: &str, kind: &str) -> Vec<&'a Yaml> {
    docs.iter()
        .filter(|(f, d)| f == file && d["kind"].as_str() == Some(kind))
        .map(|(_, d)| d)
        .collect()
}

fn strings(y: &Yaml) -> Vec<String> {
    y.as_vec()
        .map(|v| {
            v.iter()
                .map(|s| match s {
                    Yaml::Integer(n) => n.to_string(),
                    other => other.as_str().unwrap_or_default().to_string(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The value of `--name=VALUE` or `--name VALUE` in an argument list.
fn flag(args: &[String], name: &str) -> Option<String> {
    let eq = format!("{name}=");
    args.iter().enumerate().find_map(|(i, a)| {
        a.strip_prefix(&eq)
            .map(str::to_string)
            .or_else(|| (a == name).then(|| args.get(i + 1).cloned()).flatten())
    })
}

/// Checks the PSK volume: a Secret volume mounted read-only at the
/// directory of `psk_path`, its item's path the file name, its Secret
/// defined with that key.
fn check_psk_mount(pod: &Yaml, container: &Yaml, psk_path: &str, secrets: &[&Yaml], what: &str) {
    let (dir, file) = psk_path.rsplit_once('/').unwrap();
    let mount = container["volumeMounts"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|m| m["mountPath"].as_str() == Some(dir))
        .unwrap_or_else(|| panic!("{what}: nothing is mounted at {dir}, where --psk-file {psk_path} looks"));
    assert_eq!(
        mount["readOnly"].as_bool(),
        Some(true),
        "{what}: the key is mounted read-only"
    );
    let volume = pod["volumes"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .unwrap();
    let secret = &volume["secret"];
    let name = secret["secretName"]
        .as_str()
        .unwrap_or_else(|| panic!("{what}: the PSK volume is no Secret"));
    let item = secret["items"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|i| i["path"].as_str() == Some(file))
        .unwrap_or_else(|| panic!("{what}: the Secret's items give no file {file}"));
    assert_eq!(secret["defaultMode"].as_i64(), Some(0o440), "{what}: 0440");
    let key = item["key"].as_str().unwrap();
    let defined = secrets
        .iter()
        .find(|s| s["metadata"]["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("{what}: Secret {name} is not defined in namespace-secret.yaml"));
    assert!(
        !defined["data"][key].is_badvalue(),
        "{what}: Secret {name} has no key {key}"
    );
}

/// Parses an argument list with the real command line: a manifest that
/// names an option or a subcommand nicbench lacks fails here.
fn parses_as_nicbench(args: &[String], what: &str) {
    let mut argv = vec!["nicbench".to_string()];
    argv.extend(args.iter().cloned());
    if let Err(e) = nicbench::cli::Cli::try_parse_from(&argv) {
        panic!("{what}: the arguments do not parse: {e}");
    }
}

#[test]
fn every_manifest_parses_and_names_its_kind() {
    for (file, doc) in documents() {
        for key in ["apiVersion", "kind"] {
            assert!(doc[key].as_str().is_some(), "{file}: a document without {key}");
        }
        assert!(doc["metadata"]["name"].as_str().is_some(), "{file}: no metadata.name");
        if doc["kind"].as_str() != Some("Namespace") {
            assert_eq!(doc["metadata"]["namespace"].as_str(), Some("nicbench"), "{file}");
        }
    }
}

#[test]
fn the_agent_daemonsets_hold_what_the_docs_promise() {
    let docs = documents();
    let secrets = find(&docs, "namespace-secret.yaml", "Secret");
    let services = find(&docs, "services.yaml", "Service");
    for (file, host_network) in [
        ("daemonset-hostnetwork.yaml", true),
        ("daemonset-pod-network.yaml", false),
    ] {
        let ds = find(&docs, file, "DaemonSet");
        assert_eq!(ds.len(), 1, "{file}");
        let pod = &ds[0]["spec"]["template"]["spec"];
        assert_eq!(
            pod["hostNetwork"].as_bool().unwrap_or(false),
            host_network,
            "{file}: hostNetwork"
        );
        let c = &pod["containers"][0];
        let args = strings(&c["args"]);
        assert_eq!(args[0], "serve", "{file}");
        assert!(args.contains(&"--allow-peer-tests".to_string()), "{file}: {args:?}");
        parses_as_nicbench(&args, file);
        let port: i64 = flag(&args, "--port").unwrap().parse().unwrap();
        assert_eq!(
            port,
            i64::from(nicbench::protocol::DEFAULT_PORT),
            "{file}: the agent's port"
        );
        let metrics: std::net::SocketAddr = flag(&args, "--metrics-listen").unwrap().parse().unwrap();
        let ports: Vec<(String, i64)> = c["ports"]
            .as_vec()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["name"].as_str().unwrap().to_string(),
                    p["containerPort"].as_i64().unwrap(),
                )
            })
            .collect();
        assert!(ports.contains(&("control".into(), port)), "{file}: {ports:?}");
        assert!(
            ports.contains(&("metrics".into(), i64::from(metrics.port()))),
            "{file}: {ports:?}"
        );
        let annotations = &ds[0]["spec"]["template"]["metadata"]["annotations"];
        assert_eq!(annotations["prometheus.io/scrape"].as_str(), Some("true"), "{file}");
        assert_eq!(
            annotations["prometheus.io/port"].as_str(),
            Some(metrics.port().to_string().as_str()),
            "{file}"
        );
        for probe in ["readinessProbe", "livenessProbe"] {
            assert_eq!(
                c[probe]["tcpSocket"]["port"].as_i64(),
                Some(port),
                "{file}: {probe} on the agent port"
            );
        }
        for bound in ["requests", "limits"] {
            for resource in ["cpu", "memory"] {
                assert!(
                    !c["resources"][bound][resource].is_badvalue(),
                    "{file}: resources.{bound}.{resource}"
                );
            }
        }
        check_psk_mount(pod, c, &flag(&args, "--psk-file").unwrap(), &secrets, file);
        // A headless Service selects exactly these pods.
        let labels = &ds[0]["spec"]["template"]["metadata"]["labels"];
        let service = services
            .iter()
            .find(|s| s["spec"]["selector"] == *labels)
            .unwrap_or_else(|| panic!("{file}: no Service selects its pods"));
        assert_eq!(
            service["spec"]["clusterIP"].as_str(),
            Some("None"),
            "{file}: the Service is headless"
        );
    }
}

#[test]
fn the_mesh_job_reaches_the_agents_through_the_headless_service() {
    let docs = documents();
    let secrets = find(&docs, "namespace-secret.yaml", "Secret");
    let job = find(&docs, "mesh-job.yaml", "Job");
    assert_eq!(job.len(), 1);
    let pod = &job[0]["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    let args = strings(&c["args"]);
    assert_eq!(args[0], "mesh");
    parses_as_nicbench(&args, "mesh-job.yaml");
    let dns = args[1].strip_prefix("dns:").expect("hosts from the Service's DNS name");
    let service = find(&docs, "services.yaml", "Service")
        .into_iter()
        .find(|s| s["metadata"]["name"].as_str() == Some("nicbench-agents"))
        .unwrap();
    assert_eq!(
        dns,
        format!(
            "{}.{}.svc.cluster.local",
            service["metadata"]["name"].as_str().unwrap(),
            service["metadata"]["namespace"].as_str().unwrap()
        )
    );
    assert_eq!(flag(&args, "--workload").as_deref(), Some("tcp"));
    check_psk_mount(pod, c, &flag(&args, "--psk-file").unwrap(), &secrets, "mesh-job.yaml");
    let metrics: std::net::SocketAddr = flag(&args, "--metrics-listen").unwrap().parse().unwrap();
    assert_eq!(c["ports"][0]["containerPort"].as_i64(), Some(i64::from(metrics.port())));
    assert_eq!(pod["restartPolicy"].as_str(), Some("Never"));
}

#[test]
fn the_servicemonitor_scrapes_the_agents_metrics_port() {
    let docs = documents();
    let monitor = find(&docs, "servicemonitor.yaml", "ServiceMonitor");
    let service = find(&docs, "services.yaml", "Service")
        .into_iter()
        .find(|s| {
            let wanted = &monitor[0]["spec"]["selector"]["matchLabels"];
            wanted
                .as_hash()
                .unwrap()
                .iter()
                .all(|(k, v)| s["metadata"]["labels"][k.as_str().unwrap()] == *v)
        })
        .expect("a Service the ServiceMonitor selects");
    let port = monitor[0]["spec"]["endpoints"][0]["port"].as_str().unwrap();
    assert!(service["spec"]["ports"]
        .as_vec()
        .unwrap()
        .iter()
        .any(|p| p["name"].as_str() == Some(port)));
    assert_eq!(monitor[0]["spec"]["endpoints"][0]["path"].as_str(), Some("/metrics"));
}

#[test]
fn the_image_is_built_from_scratch_by_contrib_container_and_the_docs_name_every_manifest() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let containerfile = std::fs::read_to_string(root.join("contrib/container/Containerfile")).unwrap();
    assert!(containerfile.contains("FROM scratch"));
    assert!(containerfile.contains("ENTRYPOINT [\"/usr/bin/nicbench\"]"));
    assert!(containerfile.contains("USER 10001"), "the manifests' runAsUser");
    assert!(containerfile.contains(&format!("EXPOSE {} 9310", nicbench::protocol::DEFAULT_PORT)));
    let docs = std::fs::read_to_string(root.join("docs/KUBERNETES.md")).unwrap();
    for entry in std::fs::read_dir(dir()).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        assert!(docs.contains(&name), "docs/KUBERNETES.md does not mention {name}");
    }
    assert!(docs.contains("contrib/container/build.sh target/release/nicbench"));
    assert!(
        docs.to_lowercase().contains("not run on a cluster"),
        "the docs say plainly what was not run"
    );
}
