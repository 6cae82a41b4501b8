//! `nicbench diff ID1 ID2`: two saved runs side by side — their figures
//! with the change in percent, then the spec, tags and host/NIC facts that
//! differ (kernel, driver, MTU, offloads, ring sizes, ...).

use std::collections::BTreeMap;
use std::io::Write;

use serde_json::Value;

use super::runs::open;
use super::stdout::write_out;
use crate::cli::store::DiffArgs;
use crate::report::runs::figure;
use crate::store::columns;
use crate::store::compare::all_metrics;
use crate::store::query::SavedRun;

/// Every leaf of a JSON value by dotted path (arrays of scalars as one leaf).
fn leaves(prefix: &str, value: &Value, out: &mut BTreeMap<String, String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                leaves(&path, v, out);
            }
        }
        Value::Array(items) if items.iter().any(|v| v.is_object() || v.is_array()) => {
            for (i, v) in items.iter().enumerate() {
                leaves(&format!("{prefix}.{i}"), v, out);
            }
        }
        Value::String(s) => {
            out.insert(prefix.to_string(), s.clone());
        }
        other => {
            out.insert(prefix.to_string(), other.to_string());
        }
    }
}

/// The paths whose values differ between the two, with both values.
pub fn differences(a: &Value, b: &Value) -> Vec<(String, String, String)> {
    let (mut left, mut right) = (BTreeMap::new(), BTreeMap::new());
    leaves("", a, &mut left);
    leaves("", b, &mut right);
    let mut paths: Vec<&String> = left.keys().chain(right.keys()).collect();
    paths.sort();
    paths.dedup();
    let absent = || "(absent)".to_string();
    paths
        .into_iter()
        .filter(|p| left.get(*p) != right.get(*p))
        .map(|p| {
            let l = left.get(p).cloned().unwrap_or_else(absent);
            let r = right.get(p).cloned().unwrap_or_else(absent);
            (p.clone(), l, r)
        })
        .collect()
}

fn facts(run: &SavedRun) -> Value {
    let mut facts = serde_json::Map::new();
    for end in ["client", "agent"] {
        if let Some(f) = run.document.pointer(&format!("/{end}/facts")) {
            facts.insert(end.into(), f.clone());
        }
    }
    let tags: serde_json::Map<String, Value> = run
        .summary
        .tags
        .iter()
        .map(|t| (t.key.clone(), Value::from(t.value.clone())))
        .collect();
    facts.insert("tags".into(), Value::Object(tags));
    Value::Object(facts)
}

/// Aligned columns; every cell shown through `outside_text::terminal`
/// (facts and spec values come from the peer and from imports).
fn table(out: &mut dyn Write, rows: &[[String; 4]]) -> std::io::Result<()> {
    let rows: Vec<[String; 4]> = rows
        .iter()
        .map(|r| r.clone().map(|c| crate::outside_text::terminal(&c).into_owned()))
        .collect();
    let rows = &rows[..];
    let mut widths = [0usize; 4];
    for row in rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    for r in rows {
        let line = format!(
            "  {:<a$}  {:>b$}  {:>c$}  {:>d$}",
            r[0],
            r[1],
            r[2],
            r[3],
            a = widths[0],
            b = widths[1],
            c = widths[2],
            d = widths[3]
        );
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

pub fn run(args: DiffArgs) -> anyhow::Result<()> {
    let store = open(&args.db)?;
    let (a, b) = (store.run(args.first)?, store.run(args.second)?);
    let (ca, cb) = (columns::of_document(&a.document), columns::of_document(&b.document));
    let value_of = |c: &columns::Columns, column: &str| c.number(column);
    let (ia, ib) = (format!("run {}", args.first), format!("run {}", args.second));
    let mut figures = vec![["figure".to_string(), ia.clone(), ib.clone(), "change".to_string()]];
    for m in all_metrics() {
        let (x, y) = (value_of(&ca, m.column), value_of(&cb, m.column));
        if x.is_none() && y.is_none() {
            continue;
        }
        let show = |v: Option<f64>| v.map(|v| figure(v, m.unit)).unwrap_or_else(|| "-".into());
        let change = match (x, y) {
            (Some(x), Some(y)) if x != 0.0 => format!("{:+.1}%", (y - x) / x * 100.0),
            _ => "-".into(),
        };
        figures.push([m.label.to_string(), show(x), show(y), change]);
    }
    let verdict = |c: &columns::Columns| c.verdict_kind.clone().unwrap_or_else(|| "-".into());
    figures.push(["verdict".into(), verdict(&ca), verdict(&cb), String::new()]);
    let sections = [
        ("spec", differences(&a.document["spec"], &b.document["spec"])),
        ("facts and tags", differences(&facts(&a), &facts(&b))),
    ];
    write_out(|out| {
        let shown = crate::outside_text::terminal;
        writeln!(out, "{ia}: {} ({})", shown(&a.command_line), shown(&a.summary.workload))?;
        writeln!(out, "{ib}: {} ({})", shown(&b.command_line), shown(&b.summary.workload))?;
        writeln!(out, "\nfigures")?;
        table(out, &figures)?;
        for (name, diffs) in &sections {
            if diffs.is_empty() {
                writeln!(out, "\n{name}: identical")?;
                continue;
            }
            writeln!(out, "\n{name} that differ")?;
            let mut rows = vec![["".to_string(), ia.clone(), ib.clone(), String::new()]];
            rows.extend(
                diffs
                    .iter()
                    .map(|(p, l, r)| [p.clone(), l.clone(), r.clone(), String::new()]),
            );
            table(out, &rows)?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_differing_leaves_are_listed() {
        let a = json!({"kernel": "6.1", "interface": {"mtu_bytes": 1500, "offloads": {"tso": true}}, "cpus": [0, 1]});
        let b = json!({"kernel": "6.1", "interface": {"mtu_bytes": 9000, "offloads": {"tso": true}}, "driver": "igb"});
        assert_eq!(
            differences(&a, &b),
            vec![
                ("cpus".into(), "[0,1]".into(), "(absent)".into()),
                ("driver".into(), "(absent)".into(), "igb".into()),
                ("interface.mtu_bytes".into(), "1500".into(), "9000".into()),
            ]
        );
    }
}
