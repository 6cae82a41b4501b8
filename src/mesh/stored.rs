//! Mesh matrices rebuilt from saved runs (tags `mesh`, `mesh_run`, `src`,
//! `dst`), for the HTML report and `nicbench plot --kind heatmap`: the
//! store is the record, the mesh document only its first view.

use std::collections::BTreeMap;

use super::matrix::{metric_of, Cell, MeshHost, MeshResult, SCHEMA};
use crate::store::query::{Filter, RunSummary};
use crate::store::{Store, StoreError};

/// What a cell shows besides its figure (read first, at the workload's path).
const VERDICT_PATHS: [&str; 2] = ["$.verdict.summary", "$.verdict.kind"];

fn tag<'a>(run: &'a RunSummary, key: &str) -> Option<&'a str> {
    run.tags.iter().find(|t| t.key == key).map(|t| t.value.as_str())
}

/// Every mesh run among the runs `filter` selects, newest first; runs
/// without the mesh tags are ignored.
pub fn meshes(store: &Store, filter: &Filter) -> Result<Vec<MeshResult>, StoreError> {
    let runs = store.runs(&Filter {
        limit: None,
        ..filter.clone()
    })?;
    // mesh_run -> its runs, in the order saved.
    let mut groups: BTreeMap<String, Vec<&RunSummary>> = BTreeMap::new();
    for run in &runs {
        if let (Some(id), Some(_), Some(_)) = (tag(run, "mesh_run"), tag(run, "src"), tag(run, "dst")) {
            groups.entry(id.to_string()).or_default().push(run);
        }
    }
    let mut out = Vec::new();
    for (mesh_run, mut group) in groups {
        group.sort_by_key(|r| r.id);
        let ids: Vec<i64> = group.iter().map(|r| r.id).collect();
        let workload = group[0].workload.clone();
        let figure = crate::workload::results_of(&workload).mesh_figure();
        let path = figure.json_path();
        let paths = [path.as_str(), VERDICT_PATHS[0], VERDICT_PATHS[1]];
        let parts: BTreeMap<i64, _> = store
            .document_parts(&ids, &paths)?
            .into_iter()
            .map(|p| (p.id, p))
            .collect();
        let mut names: Vec<String> = Vec::new();
        for r in &group {
            for key in ["src", "dst"] {
                let name = tag(r, key).expect("grouped by it").to_string();
                if !names.contains(&name) {
                    names.push(name);
                }
            }
        }
        names.sort();
        let index = |name: &str| names.iter().position(|n| n == name).expect("collected above");
        let cells: Vec<Cell> = group
            .iter()
            .filter(|r| r.workload == workload)
            .map(|r| {
                let p = parts.get(&r.id);
                let value = p.and_then(|p| p.number(0)).and_then(|v| figure.of_number(v));
                let text = |i: usize| {
                    p.and_then(|p| match p.values.get(i) {
                        Some(rusqlite::types::Value::Text(t)) => Some(t.clone()),
                        _ => None,
                    })
                };
                Cell {
                    src: index(tag(r, "src").expect("grouped by it")),
                    dst: index(tag(r, "dst").expect("grouped by it")),
                    value,
                    run_id: Some(r.id),
                    verdict: text(1),
                    verdict_kind: text(2),
                    error: None,
                    started_at_unix_seconds: r.started_at_unix_seconds,
                    seconds: 0.0,
                    round: 0,
                }
            })
            .collect();
        let (metric, unit, _) = metric_of(&workload);
        let first = cells
            .iter()
            .map(|c| c.started_at_unix_seconds)
            .fold(f64::INFINITY, f64::min);
        let mut mesh = MeshResult {
            schema: SCHEMA.into(),
            mesh: tag(group[0], "mesh").unwrap_or("mesh").to_string(),
            mesh_run,
            workload,
            metric: metric.into(),
            unit: unit.into(),
            started_at_unix_seconds: first,
            wall_seconds: 0.0,
            rounds: 0,
            test_seconds: 0.0,
            hosts: names
                .iter()
                .map(|n| MeshHost {
                    name: n.clone(),
                    address: String::new(),
                    status: "ok".into(),
                    reason: None,
                })
                .collect(),
            cells,
            outliers: Vec::new(),
        };
        mesh.find_outliers();
        out.push(mesh);
    }
    out.sort_by(|a, b| b.started_at_unix_seconds.total_cmp(&a.started_at_unix_seconds));
    Ok(out)
}
