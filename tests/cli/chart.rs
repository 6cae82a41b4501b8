//! `nicbench plot` and `nicbench report`: charts that parse and name their
//! series, PNGs of the asked size, empty selections refused, and the HTML
//! report rendered in headless Chromium as a person would see it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common::{clean_env, nicbench, nicbench_json, stderr, wait_output, COMMAND_LIMIT};

/// A database of the fixture runs, tagged by two "cards".
struct Fixtures {
    dir: tempfile::TempDir,
}

const FIXTURES: &[(&str, &[&str])] = &[
    (
        "nic=e1000",
        &["run-tcp.json", "run-tcp-repeat.json", "run-sweep.json", "run-rr.json"],
    ),
    (
        "nic=igb",
        &[
            "run-tcp-linerate-repeat.json",
            "run-udp.json",
            "run-udp-bidir.json",
            "run-sweep.json",
            "run-rr.json",
        ],
    ),
];

impl Fixtures {
    fn new() -> Fixtures {
        let dir = tempfile::tempdir().unwrap();
        let f = Fixtures { dir };
        for (tag, files) in FIXTURES {
            let mut args = vec![
                "import".to_string(),
                "--db".into(),
                f.db(),
                "--tag".into(),
                tag.to_string(),
            ];
            args.extend(
                files
                    .iter()
                    .map(|n| format!("{}/tests/fixtures/{n}", env!("CARGO_MANIFEST_DIR"))),
            );
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = nicbench(&args);
            assert!(out.status.success(), "{}", stderr(&out));
        }
        f
    }

    fn db(&self) -> String {
        self.path("r.db").display().to_string()
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `nicbench plot --db DB ARGS -o NAME`, which must succeed.
    fn plot(&self, name: &str, args: &[&str]) -> PathBuf {
        let out_path = self.path(name);
        let db = self.db();
        let mut all = vec!["plot", "--db", &db, "-o", out_path.to_str().unwrap()];
        all.extend(args);
        let out = nicbench(&all);
        assert!(out.status.success(), "plot {args:?}: {}", stderr(&out));
        out_path
    }
}

/// The elements of a parsed SVG under the `<g class=part>` groups.
fn in_part<'a>(doc: &'a roxmltree::Document, part: &str) -> Vec<roxmltree::Node<'a, 'a>> {
    doc.descendants()
        .filter(|n| n.has_tag_name("g") && n.attribute("class") == Some(part))
        .flat_map(|g| g.descendants().filter(|n| n.is_element() && !n.has_tag_name("g")))
        .collect()
}

fn check_svg(path: &Path, series: &[&str]) {
    let text = std::fs::read_to_string(path).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap_or_else(|e| panic!("{}: not XML: {e}", path.display()));
    let root = doc.root_element();
    assert!(root.has_tag_name("svg") && root.attribute("role") == Some("img"));
    let axes = in_part(&doc, "axes");
    assert!(axes.iter().any(|n| n.has_tag_name("line")), "no axis line");
    assert!(
        axes.iter().filter(|n| n.has_tag_name("text")).count() >= 4,
        "no tick labels"
    );
    let data = in_part(&doc, "data");
    assert!(
        data.iter().any(|n| ["rect", "polyline", "circle", "polygon"]
            .iter()
            .any(|t| n.has_tag_name(*t))),
        "no data mark"
    );
    let texts: Vec<&str> = doc.descendants().filter_map(|n| n.text()).collect();
    for name in series {
        assert!(
            texts.iter().any(|t| t.contains(name)),
            "{}: series {name} not named",
            path.display()
        );
    }
    // Axis titles carry units.
    assert!(
        texts.iter().any(|t| t.contains('(') && t.contains(')')),
        "no unit in an axis title"
    );
}

#[test]
fn every_chart_kind_is_svg_that_parses_and_names_its_series() {
    let f = Fixtures::new();
    let bars = f.plot(
        "bars.svg",
        &["--kind", "bars", "--group", "workload", "--series", "tag:nic"],
    );
    check_svg(&bars, &["e1000", "igb", "tcp", "receiver throughput (bit/s)"]);
    let cpu = f.plot("cpu.svg", &["--kind", "cpu", "--group", "tag:nic"]);
    check_svg(
        &cpu,
        &["user", "system", "softirq", "irq", "e1000", "CPU busy (% of all cores)"],
    );
    let sweep = f.plot("sweep.svg", &["--kind", "sweep"]);
    check_svg(&sweep, &["nic=e1000", "nic=igb", "peak", "n½", "bandwidth (bit/s)"]);
    let latency = f.plot("latency.svg", &["--kind", "latency", "--tag", "nic=igb"]);
    check_svg(&latency, &["nic=igb", "p99.9", "latency (s, log)"]);
    let text = std::fs::read_to_string(&latency).unwrap();
    assert!(!text.contains("nic=e1000"), "the tag filter was not applied");
    let timeline = f.plot("timeline.svg", &["--kind", "timeline", "--id", "1"]);
    check_svg(&timeline, &["stream 1", "stream 2", "time since the start (s)"]);
}

#[test]
fn a_png_chart_decodes_at_the_asked_size_and_is_not_blank() {
    let f = Fixtures::new();
    let path = f.plot(
        "bars.png",
        &[
            "--kind", "bars", "--series", "tag:nic", "--width", "640", "--height", "400",
        ],
    );
    let decoder = png::Decoder::new(std::fs::File::open(&path).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut pixels).unwrap();
    // Slide-ready by default: laid out at 640x400, drawn twice as large.
    assert_eq!((info.width, info.height), (1280, 800));
    let colours: std::collections::HashSet<&[u8]> = pixels.chunks(3).collect();
    assert!(colours.len() > 16, "only {} colours", colours.len());
    let one = f.plot(
        "bars-1x.png",
        &["--kind", "bars", "--width", "640", "--height", "400", "--scale", "1"],
    );
    let info = png::Decoder::new(std::fs::File::open(&one).unwrap())
        .read_info()
        .unwrap()
        .info()
        .clone();
    assert_eq!((info.width, info.height), (640, 400));
    // Too large an image is refused with the size it would have had.
    let db = f.db();
    let out = nicbench(&[
        "plot", "--db", &db, "--kind", "bars", "--width", "5000", "-o", "big.png",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("10000x1080"), "{}", stderr(&out));
}

#[test]
fn a_chart_of_nothing_is_an_error_not_an_empty_picture() {
    let f = Fixtures::new();
    let db = f.db();
    let out_path = f.path("none.svg");
    let out_arg = out_path.to_str().unwrap();
    let out = nicbench(&[
        "plot", "--db", &db, "--kind", "bars", "--tag", "nic=none", "-o", out_arg,
    ]);
    assert_eq!(out.status.code(), Some(7), "{}", stderr(&out));
    assert!(stderr(&out).contains("no complete run matches"), "{}", stderr(&out));
    // The hint opens the database the command read (issue 72, item 5).
    let listing = format!(
        "`{}` lists them",
        nicbench::shell::join(["nicbench", "runs", "--db", &db])
    );
    assert!(stderr(&out).contains(&listing), "{}", stderr(&out));
    // Runs match, but none is a sweep.
    let out = nicbench(&[
        "plot",
        "--db",
        &db,
        "--kind",
        "sweep",
        "--workload",
        "tcp",
        "-o",
        out_arg,
    ]);
    assert_eq!(out.status.code(), Some(7), "{}", stderr(&out));
    assert!(stderr(&out).contains("none is a sweep"), "{}", stderr(&out));
    assert!(!out_path.exists(), "an empty chart was written");
    // An unknown format is refused before anything is read.
    let out = nicbench(&["plot", "--db", &db, "--kind", "bars", "-o", "chart.gif"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("end it in .svg or .png"), "{}", stderr(&out));
}

#[test]
fn a_chart_can_be_drawn_from_result_files_without_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("sweep.svg");
    let fixture = format!("{}/tests/fixtures/run-sweep.json", env!("CARGO_MANIFEST_DIR"));
    let out = nicbench(&["plot", "--kind", "sweep", &fixture, "-o", out_path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    // Named by what it is, not "run 1".
    check_svg(&out_path, &["sweep ping-pong"]);
}

/// A real loopback `nicbench loaded` run, drawn from its file as the
/// classic time series and as its round-trip distribution.
#[test]
fn a_loaded_run_is_drawn_as_its_time_series_and_its_round_trip_distribution() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = format!("{}/tests/fixtures/loaded-loopback.json", env!("CARGO_MANIFEST_DIR"));
    let svg = dir.path().join("loaded.svg");
    let out = nicbench(&["plot", "--kind", "loaded", &fixture, "-o", svg.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    check_svg(
        &svg,
        &[
            "download (agent -> client)",
            "upload (client -> agent)",
            "UDP probes",
            "TCP probes, idle connection (foreign)",
            "client sending (self)",
            "agent sending (self)",
            "idle",
            "bidirectional",
            "round trip (s, log)",
        ],
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap();
    assert_eq!(
        in_part(&doc, "phases")
            .iter()
            .filter(|n| n.has_tag_name("rect"))
            .count(),
        8,
        "four phases shaded in each of two panels"
    );
    let png = dir.path().join("cdf.png");
    let out = nicbench(&["plot", "--kind", "loaded-cdf", &fixture, "-o", png.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    for phase in ["idle (", "download (", "upload (", "bidirectional ("] {
        assert!(said.contains(phase), "{said}");
    }
    let mut reader = png::Decoder::new(std::fs::File::open(&png).unwrap())
        .read_info()
        .unwrap();
    let mut pixels = vec![0; reader.output_buffer_size()];
    reader.next_frame(&mut pixels).unwrap();
    assert!(pixels.chunks(3).collect::<std::collections::HashSet<_>>().len() > 16);
    // Its figures as bars: the added delay is a delay (lower is better), RPM is not.
    for (metric, lower) in [("added", true), ("rpm", false)] {
        let out = nicbench(&[
            "plot",
            "--kind",
            "bars",
            "--metric",
            metric,
            &fixture,
            "-o",
            svg.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let text = std::fs::read_to_string(&svg).unwrap();
        assert_eq!(text.contains("lower is better"), lower, "{metric}");
    }
    // A run of another workload has nothing to draw so: refused, saying why.
    let tcp = format!("{}/tests/fixtures/run-tcp.json", env!("CARGO_MANIFEST_DIR"));
    let out = nicbench(&["plot", "--kind", "loaded", &tcp, "-o", svg.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(7), "{}", stderr(&out));
    assert!(stderr(&out).contains("nicbench loaded"), "{}", stderr(&out));
}

/// The report draws the newest three loaded runs, two charts each, and
/// says which when it leaves one out.
#[test]
fn the_report_draws_the_newest_loaded_runs_and_says_which() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db").display().to_string();
    let fixture = format!("{}/tests/fixtures/loaded-loopback.json", env!("CARGO_MANIFEST_DIR"));
    for _ in 0..4 {
        let out = nicbench(&["import", "--db", &db, &fixture]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let page = dir.path().join("report.html");
    let out = nicbench(&["report", "--db", &db, "-o", page.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let html = std::fs::read_to_string(&page).unwrap();
    for run in 2..=4 {
        for title in ["Throughput and round trips under load", "idle against each load phase"] {
            assert!(html.contains(&format!("{title}, run {run}")), "{title}, run {run}");
        }
    }
    assert!(!html.contains("under load, run 1"), "the oldest run was drawn");
    assert!(
        html.contains("drawn for the newest 3 of 4 runs (run 2, 3, 4)"),
        "no note of the runs left out"
    );
}

/// The report of the fixtures, tables by workload and card.
fn report(f: &Fixtures) -> (PathBuf, String) {
    let page = f.path("report.html");
    let db = f.db();
    let out = nicbench(&["report", "--db", &db, "--cols", "tag:nic", "-o", page.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    // A bar chart per table (15), CPU, sweep, latency, timeline.
    assert!(String::from_utf8_lossy(&out.stdout).contains("report of 9 runs (19 charts, 15 tables)"));
    let html = std::fs::read_to_string(&page).unwrap();
    (page, html)
}

#[test]
fn the_report_is_one_file_that_fetches_nothing() {
    let f = Fixtures::new();
    let (_, html) = report(&f);
    let without_svg_namespace = html.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    for outside in ["http://", "https://", "<link", " src=", "url(", "@import"] {
        assert!(
            !without_svg_namespace.contains(outside),
            "the report refers outside: {outside}"
        );
    }
    assert_eq!(html.matches("<svg").count(), 19);
    // Every run's command, verdict and line-rate share; every host's facts.
    assert!(html.contains("nicbench import"));
    assert!(html.contains("57.4%"), "line-rate share of the linerate fixture");
    assert!(html.contains("cpu_starved"));
    assert!(html.contains("<th scope=\"row\">kernel</th><td>6.18.44-fc-v669</td>"));
    assert!(html.contains("@media print") && html.contains("name=\"viewport\""));
    // The comparison table of compare, cell for cell.
    let db = f.db();
    let out = nicbench(&["compare", "--db", &db, "--cols", "tag:nic"]);
    let text = String::from_utf8_lossy(&out.stdout);
    // (Rows are cases since 8c5296f: a TCP case's cell.)
    let cell = text
        .lines()
        .filter(|l| l.starts_with("TCP"))
        .flat_map(|l| l.split("  ").map(str::trim))
        .find(|c| c.contains("(n="))
        .unwrap_or_else(|| panic!("no TCP cell: {text}"));
    assert!(
        html.contains(&format!("<td class=\"num\">{cell}</td>")),
        "missing {cell}"
    );
}

#[test]
fn a_report_of_nothing_is_an_error() {
    let f = Fixtures::new();
    let db = f.db();
    let page = f.path("none.html");
    let out = nicbench(&["report", "--db", &db, "--tag", "nic=none", "-o", page.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(7), "{}", stderr(&out));
    assert!(!page.exists());
}

/// A database of one fixture file per value of `nic=`, each imported
/// under its tag (and, for `agent`, with that agent host name).
fn imported(dir: &Path, runs: &[(&str, &str, Option<&str>)]) -> String {
    let db = dir.join("r.db").display().to_string();
    for (i, (tag, file, agent)) in runs.iter().enumerate() {
        let path = format!("{}/tests/fixtures/{file}", env!("CARGO_MANIFEST_DIR"));
        let mut doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        if let Some(agent) = agent {
            doc["agent"]["facts"]["hostname"] = (*agent).into();
        }
        let copy = dir.join(format!("{i}-{file}"));
        std::fs::write(&copy, serde_json::to_vec(&doc).unwrap()).unwrap();
        let out = nicbench(&["import", "--db", &db, "--tag", tag, copy.to_str().unwrap()]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    db
}

/// The cells of the comparison table of `metric` in a report, header first.
fn table_cells(html: &str, metric: &str) -> Vec<Vec<String>> {
    let at = html
        .find(&format!("<table class=\"sortable compare\" data-metric=\"{metric}\">"))
        .unwrap_or_else(|| panic!("no {metric} table"));
    let table = &html[at..at + html[at..].find("</table>").unwrap()];
    table
        .split("<tr>")
        .skip(1)
        .map(|row| {
            row.split("</t")
                .filter_map(|c| c.rfind('>').map(|i| unescape(&c[i + 1..])))
                .filter(|c| !c.is_empty())
                .collect()
        })
        .collect()
}

#[test]
fn report_baseline_adds_a_ratio_column_per_other_column_and_refuses_an_unknown_one() {
    let dir = tempfile::tempdir().unwrap();
    let db = imported(
        dir.path(),
        &[
            ("nic=a", "run-tcp-repeat.json", None),
            ("nic=b", "run-tcp-linerate-repeat.json", None),
        ],
    );
    let page = dir.path().join("r.html");
    let out = nicbench(&[
        "report",
        "--db",
        &db,
        "--cols",
        "tag:nic",
        "--baseline",
        "a",
        "-o",
        page.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let html = std::fs::read_to_string(&page).unwrap();
    // The ratio is b's figure over a's, as compare computes the cells.
    let table = nicbench_json(&["compare", "--db", &db, "--cols", "tag:nic", "--format", "json"]);
    let value = |col: &str| {
        table["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["col"][0] == col)
            .unwrap()["figures"]["throughput"]["value"]
            .as_f64()
            .unwrap()
    };
    let ratio = format!("{:.2}x", value("b") / value("a"));
    assert_ne!(ratio, "1.00x", "the fixtures differ");
    let cells = table_cells(&html, "throughput");
    assert_eq!(cells[0], ["case", "a", "b", "b vs a"], "{cells:?}");
    assert_eq!(cells[1].last().unwrap(), &ratio, "{cells:?}");
    assert!(
        html.contains("baseline a: the &quot;vs&quot; columns"),
        "the caption names the baseline"
    );

    let out = nicbench(&[
        "report",
        "--db",
        &db,
        "--cols",
        "tag:nic",
        "--baseline",
        "c",
        "-o",
        page.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--baseline c: no table has such a column; the columns are: a, b"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_report_without_cols_has_one_column_per_host_pair() {
    let dir = tempfile::tempdir().unwrap();
    let db = imported(
        dir.path(),
        &[("nic=a", "run-tcp.json", None), ("nic=b", "run-tcp.json", Some("box2"))],
    );
    let page = dir.path().join("r.html");
    let out = nicbench(&["report", "--db", &db, "-o", page.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let html = std::fs::read_to_string(&page).unwrap();
    let cells = table_cells(&html, "throughput");
    assert_eq!(cells[0], ["case", "vm -> box2", "vm -> vm"], "{cells:?}");
    // One pair: one column of all runs, as before.
    let out = nicbench(&["report", "--db", &db, "--tag", "nic=a", "-o", page.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let cells = table_cells(&std::fs::read_to_string(&page).unwrap(), "throughput");
    assert_eq!(cells[0], ["case", "all"], "{cells:?}");
}

/// The numbers of an SVG polyline's or rect's coordinates.
fn number(node: &roxmltree::Node, name: &str) -> f64 {
    node.attribute(name).unwrap().parse().unwrap()
}

#[test]
fn every_report_table_has_its_bar_chart_beside_it_a_bar_per_cell_and_whiskers_from_min_to_max() {
    let f = Fixtures::new();
    let page = f.path("all.html");
    let db = f.db();
    // One column: the TCP 1-stream cell pools two runs of the same case.
    let out = nicbench(&["report", "--db", &db, "-o", page.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let html = std::fs::read_to_string(&page).unwrap();
    let sections: Vec<&str> = html.split("<section class=\"metric").skip(1).collect();
    assert!(sections.len() >= 10, "{} metric sections", sections.len());
    let mut whiskers_checked = 0;
    for section in sections {
        let section = &section[..section.find("</section>").unwrap()];
        let metric = section.split('"').nth(2).unwrap().to_string();
        let cells = table_cells(section, &metric);
        let filled = cells[1..].iter().flatten().filter(|c| c.contains("(n=")).count();
        let start = section
            .find("<svg")
            .unwrap_or_else(|| panic!("{metric}: no chart beside its table"));
        let svg = &section[start..start + section[start..].find("</svg>").unwrap() + 6];
        let doc = roxmltree::Document::parse(svg).unwrap();
        let bars: Vec<_> = in_part(&doc, "data")
            .into_iter()
            .filter(|n| n.has_tag_name("rect") && n.attribute("data-tip").is_some())
            .collect();
        assert_eq!(bars.len(), filled, "{metric}: one bar per cell of the table");
        // A bar of several runs: its whisker spans their min to max.
        for bar in bars
            .iter()
            .filter(|b| b.attribute("data-tip").unwrap().contains(" to "))
        {
            let tip = bar.attribute("data-tip").unwrap();
            let cell = tip.lines().next().unwrap();
            let row = cells.iter().find(|r| r[0] == cell).unwrap();
            // "23.79 (n=2 [2 runs], 22.92-24.66)": the median and the range.
            let text = &row[1];
            let figures: Vec<f64> = text
                .split(|c: char| !(c.is_ascii_digit() || c == '.'))
                .filter_map(|t| t.parse().ok())
                .collect();
            let (value, min, max) = (figures[0], figures[figures.len() - 2], figures[figures.len() - 1]);
            let (y, height) = (number(bar, "y"), number(bar, "height"));
            let (bottom, per_unit) = (y + height, height / value);
            let centre = number(bar, "x") + number(bar, "width") / 2.0;
            let whisker = in_part(&doc, "data")
                .into_iter()
                .filter(|n| n.has_tag_name("polyline"))
                .map(|n| {
                    n.attribute("points")
                        .unwrap()
                        .split([' ', ','])
                        .map(|v| v.parse::<f64>().unwrap())
                        .collect::<Vec<_>>()
                })
                .find(|p| p.len() == 4 && p[0] == p[2] && (p[0] - centre).abs() <= 2.0)
                .unwrap_or_else(|| panic!("{metric}: no whisker on {tip}"));
            let (lo, hi) = (whisker[1].max(whisker[3]), whisker[1].min(whisker[3]));
            assert!(
                (lo - (bottom - min * per_unit)).abs() <= 2.0,
                "{metric}: whisker low {lo}, min {min}"
            );
            assert!(
                (hi - (bottom - max * per_unit)).abs() <= 2.0,
                "{metric}: whisker high {hi}, max {max}"
            );
            whiskers_checked += 1;
        }
    }
    assert!(whiskers_checked >= 1, "no bar of several runs with distinct figures");
}

/// Headless Chromium (Debian's `chromium`), for `require!`.
pub(crate) fn chromium() -> Result<PathBuf, String> {
    let found = ["chromium", "chromium-browser"].iter().find_map(|name| {
        Command::new(name)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .ok()
            .filter(|s| s.success())
            .map(|_| PathBuf::from(name))
    });
    found.ok_or_else(|| "chromium is not installed: apt-get install chromium".to_string())
}

/// Runs headless Chromium on a page; returns its stdout and stderr.
fn browse(browser: &Path, profile: &Path, window: &str, args: &[&str], page: &Path) -> (String, String) {
    let mut command = Command::new(browser);
    clean_env(&mut command)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
        ])
        .arg("--enable-logging=stderr")
        .arg("--v=0")
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--window-size={window}"))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = wait_output(command.spawn().expect("start chromium"), COMMAND_LIMIT, "chromium");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Errors the page reports (console.error, uncaught exceptions), caught
/// before the page's own script runs.
const CATCH_ERRORS: &str = r#"<script>window.__errors=[];window.addEventListener('error',function(e){__errors.push(String(e.message))});
var __ce=console.error;console.error=function(){__errors.push(Array.prototype.join.call(arguments,' '));__ce.apply(console,arguments)};</script>"#;

/// After the page's script: what the browser drew and laid out, as JSON in
/// a <pre id=nicbench-check> that --dump-dom prints.
const INSPECT: &str = r#"<script>(function(){
var r={errors:window.__errors,charts:[],cells:[],sorted:[],scroll:[document.documentElement.scrollWidth,window.innerWidth]};
document.querySelectorAll('svg.chart').forEach(function(svg){
 var visible=function(sel){return Array.prototype.filter.call(svg.querySelectorAll(sel),function(e){var b=e.getBBox();return b.width>0||b.height>0;}).length;};
 var box=svg.getBoundingClientRect();
 r.charts.push({title:svg.querySelector('title').textContent,axes:visible('g.axes line'),ticks:visible('g.axes text'),marks:visible('g.data rect, g.data polyline, g.data circle, g.data polygon'),width:box.width});
});
document.querySelectorAll('table.runs tbody tr').forEach(function(tr){r.cells.push(Array.prototype.map.call(tr.cells,function(c){return c.textContent.trim();}));});
document.querySelector('table.runs th').click();
document.querySelectorAll('table.runs tbody tr').forEach(function(tr){r.sorted.push(tr.cells[0].textContent.trim());});
var pre=document.createElement('pre');pre.id='nicbench-check';pre.textContent=JSON.stringify(r);document.body.appendChild(pre);
})();</script>"#;

/// The report `html` as headless Chromium draws it on a phone-sized
/// window (written to `page` with the checks around it): what [`INSPECT`]
/// measured, after asserting what holds for every report: no error on
/// the page, every chart with axes, tick labels and a data mark and no
/// wider than the window, no sideways scrolling.
pub(crate) fn inspect_on_a_phone(browser: &Path, profile: &Path, page: &Path, html: &str) -> serde_json::Value {
    let with_checks = html.replacen("<head>", &format!("<head>{CATCH_ERRORS}"), 1).replacen(
        "</body>",
        &format!("{INSPECT}</body>"),
        1,
    );
    std::fs::write(page, with_checks).unwrap();
    let (dom, _) = browse(browser, profile, "390,844", &["--dump-dom"], page);
    let marker = "<pre id=\"nicbench-check\">";
    let start = dom.find(marker).expect("the inspection ran") + marker.len();
    let end = start + dom[start..].find("</pre>").unwrap();
    let r: serde_json::Value = serde_json::from_str(&unescape(&dom[start..end])).unwrap();

    assert_eq!(r["errors"], serde_json::json!([]), "errors on the page");
    let charts = r["charts"].as_array().unwrap();
    let (scroll_width, window_width) = (r["scroll"][0].as_u64().unwrap(), r["scroll"][1].as_u64().unwrap());
    for c in charts {
        assert!(c["axes"].as_u64().unwrap() >= 2, "no axes drawn: {c}");
        assert!(c["ticks"].as_u64().unwrap() >= 4, "no tick labels drawn: {c}");
        assert!(c["marks"].as_u64().unwrap() >= 1, "no data mark drawn: {c}");
        assert!(
            c["width"].as_f64().unwrap() <= window_width as f64,
            "chart wider than the window ({window_width}): {c}"
        );
    }
    assert!(window_width <= 600, "not a phone-sized window: {window_width}");
    assert!(
        scroll_width <= window_width,
        "the page scrolls sideways on a phone: {scroll_width} > {window_width}"
    );
    r
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
}

/// Pixels of a screenshot: its size, and how many differ from the most common colour.
fn screenshot_pixels(path: &Path) -> ((u32, u32), usize) {
    let decoder = png::Decoder::new(std::fs::File::open(path).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut pixels).unwrap();
    let step = info.color_type.samples();
    let mut counts = std::collections::HashMap::new();
    for p in pixels[..info.buffer_size()].chunks(step) {
        *counts.entry(&p[..3]).or_insert(0usize) += 1;
    }
    let common = counts.values().max().copied().unwrap_or(0);
    ((info.width, info.height), counts.values().sum::<usize>() - common)
}

#[test]
fn the_report_renders_in_headless_chromium() {
    let browser = require!(chromium());
    let f = Fixtures::new();
    let (page, html) = report(&f);
    let profile = f.path("chromium-profile");

    // Screenshots as a person sees the page: a laptop and a phone.
    for (name, window) in [("laptop.png", "1280,2400"), ("phone.png", "390,1600")] {
        let shot = f.path(name);
        let (_, log) = browse(
            &browser,
            &profile,
            window,
            &[&format!("--screenshot={}", shot.display())],
            &page,
        );
        let ((w, _), differing) = screenshot_pixels(&shot);
        assert_eq!(w.to_string(), window.split(',').next().unwrap());
        assert!(
            differing > 5000,
            "{name} is blank: {differing} pixels differ from the background"
        );
        let console: Vec<&str> = log.lines().filter(|l| l.contains(":CONSOLE")).collect();
        assert!(console.is_empty(), "console output: {console:?}");
        if let Some(dir) = std::env::var_os("NICBENCH_SCREENSHOTS") {
            std::fs::copy(&shot, Path::new(&dir).join(name)).unwrap();
        }
    }

    // What the browser drew, measured inside it, on a phone-sized window.
    let r = inspect_on_a_phone(&browser, &profile, &f.path("inspected.html"), &html);
    assert_eq!(r["charts"].as_array().unwrap().len(), 19);
    // The runs table: one row per run, newest first, with the expected cells.
    let cells = r["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 9);
    assert_eq!(cells[0][0], "9");
    let linerate = cells.iter().find(|row| row[6] == "57.4%").expect("the line-rate run");
    assert_eq!(linerate[4], "nic=igb");
    assert!(linerate[5].as_str().unwrap().ends_with("Gbit/s"));
    assert!(linerate[7].as_str().unwrap().starts_with("cpu_starved"));
    // A click on the id header sorts ascending.
    let sorted: Vec<&str> = r["sorted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(sorted, ["1", "2", "3", "4", "5", "6", "7", "8", "9"]);
}

/// After the page's script: each row of the failed-cells table as the
/// browser laid it out (its cells' text, and whether it has a height).
const INSPECT_PLAN_CELLS: &str = r#"<script>(function(){
var rows=[];document.querySelectorAll('table.plan-cells tbody tr').forEach(function(tr){
 rows.push({cells:Array.prototype.map.call(tr.cells,function(c){return c.textContent.trim();}),shown:tr.getBoundingClientRect().height>0});});
var box=document.querySelector('.summary');
var pre=document.createElement('pre');pre.id='nicbench-check';pre.textContent=JSON.stringify({rows:rows,summary:box?box.textContent:''});document.body.appendChild(pre);
})();</script>"#;

#[test]
fn a_plan_report_lists_each_failed_cell_with_its_reason_in_headless_chromium() {
    let browser = require!(chromium());
    let agent = crate::common::AgentProcess::start(&[]);
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db").display().to_string();
    let plan = dir.path().join("cells.toml");
    std::fs::write(
        &plan,
        format!(
            "name = \"cells\"\n[defaults]\nduration = \"0.3s\"\n\
             [[agents]]\nlabel = \"good\"\naddress = \"127.0.0.1:{}\"\n\
             [[agents]]\nlabel = \"gone\"\naddress = \"127.0.0.1:{closed}\"\n\
             [matrix]\nworkload = [\"tcp\", \"udp\"]\n",
            agent.port
        ),
    )
    .unwrap();
    let out = nicbench(&["run", plan.to_str().unwrap(), "--db", &db]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(5), "{text}\n{}", stderr(&out));
    let summary = text
        .lines()
        .find_map(|l| l.strip_prefix("summary: "))
        .expect("the summary file");
    let page = Path::new(summary).with_file_name("report.html");
    let html = std::fs::read_to_string(&page).unwrap_or_else(|e| panic!("{}: {e}\n{text}", page.display()));
    let inspected = dir.path().join("inspected.html");
    std::fs::write(
        &inspected,
        html.replacen("</body>", &format!("{INSPECT_PLAN_CELLS}</body>"), 1),
    )
    .unwrap();
    let profile = dir.path().join("chromium-profile");
    let (dom, _) = browse(&browser, &profile, "1280,2000", &["--dump-dom"], &inspected);
    let marker = "<pre id=\"nicbench-check\">";
    let start = dom.find(marker).expect("the inspection ran") + marker.len();
    let end = start + dom[start..].find("</pre>").unwrap();
    let r: serde_json::Value = serde_json::from_str(&unescape(&dom[start..end])).unwrap();
    let rows = r["rows"].as_array().unwrap();
    // Both cases of the agent that is gone, each with the reason its run failed.
    let failed: Vec<&str> = text.lines().filter_map(|l| l.trim().strip_prefix("FAILED ")).collect();
    assert_eq!(failed.len(), 2, "{text}");
    for line in failed {
        let (case, reason) = line.split_once(": ").unwrap();
        let row = rows
            .iter()
            .find(|row| row["cells"][0] == case)
            .unwrap_or_else(|| panic!("failed cell {case} not listed: {rows:?}"));
        assert_eq!(row["cells"][1], "failed", "{row}");
        assert_eq!(row["cells"][2], reason, "{row}");
        assert_eq!(row["shown"], true, "{row}");
    }
    assert_eq!(rows.len(), 2, "only the failed cells: {rows:?}");
    let summary_box = r["summary"].as_str().unwrap();
    assert!(summary_box.contains("plan cells not measured2"), "{summary_box}");
    assert!(summary_box.contains("hosts1"), "one host on loopback: {summary_box}");
}

/// A report whose columns are one tag draws the sweeps one chart per
/// column value once a single chart would hold more than six lines: two
/// cards at four MTUs are two charts of four lines each, in MTU order,
/// each titled by its card; the plan-style axis names are a reader's.
#[test]
fn the_report_draws_one_sweep_chart_per_card_when_one_would_hold_too_many_lines() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db").display().to_string();
    let source = format!("{}/tests/fixtures/run-sweep.json", env!("CARGO_MANIFEST_DIR"));
    let original: serde_json::Value = serde_json::from_slice(&std::fs::read(&source).unwrap()).unwrap();
    let mtus = ["16128", "1500", "9000", "4088"];
    for (c, card) in ["card-a", "card-b"].iter().enumerate() {
        for (m, mtu) in mtus.iter().enumerate() {
            // Points of their own, so no two lines are the same line.
            let mut doc = original.clone();
            let scale = 1.0 + (c * mtus.len() + m) as f64 / 10.0;
            for p in doc["streams"][0]["sender"]["sweep"]["points"].as_array_mut().unwrap() {
                for key in ["best_bits_per_second", "mean_bits_per_second"] {
                    p[key] = (p[key].as_f64().unwrap() * scale).into();
                }
            }
            let copy = dir.path().join(format!("{card}-{mtu}.json"));
            std::fs::write(&copy, serde_json::to_vec(&doc).unwrap()).unwrap();
            let (card_tag, mtu_tag) = (format!("card={card}"), format!("mtu={mtu}"));
            let out = nicbench(&[
                "import",
                "--db",
                &db,
                "--tag",
                &card_tag,
                "--tag",
                &mtu_tag,
                copy.to_str().unwrap(),
            ]);
            assert!(out.status.success(), "{}", stderr(&out));
        }
    }
    let page = dir.path().join("report.html");
    let out = nicbench(&[
        "report",
        "--db",
        &db,
        "--rows",
        "tag:mtu",
        "--cols",
        "tag:card",
        "-o",
        page.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let html = std::fs::read_to_string(&page).unwrap();
    let charts: Vec<roxmltree::Document> = html
        .split("<svg")
        .skip(1)
        .map(|s| format!("<svg{}", &s[..s.find("</svg>").unwrap() + 6]))
        .map(|svg| roxmltree::Document::parse(Box::leak(svg.into_boxed_str())).unwrap())
        .collect();
    let title = |d: &roxmltree::Document| {
        d.descendants()
            .find(|n| n.has_tag_name("title"))
            .and_then(|n| n.text())
            .unwrap_or("")
            .to_string()
    };
    let sweeps: Vec<&roxmltree::Document> = charts
        .iter()
        .filter(|d| title(d).starts_with("Bandwidth and latency against message size"))
        .collect();
    let titles: Vec<String> = sweeps.iter().map(|d| title(d)).collect();
    assert_eq!(titles.len(), 2, "{titles:?}");
    assert!(
        titles[0].ends_with(": card-a") && titles[1].ends_with(": card-b"),
        "{titles:?}"
    );
    for sweep in &sweeps {
        let desc = sweep
            .descendants()
            .find(|n| n.has_tag_name("desc"))
            .and_then(|n| n.text())
            .unwrap_or("")
            .to_string();
        // Four lines named by their MTU alone, in the MTU's numeric order.
        let at: Vec<usize> = ["mtu=1500", "mtu=4088", "mtu=9000", "mtu=16128"]
            .iter()
            .map(|m| desc.find(m).unwrap_or_else(|| panic!("{m} not in {desc}")))
            .collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{desc}");
        assert!(!desc.contains("card="), "{desc}");
    }
    // Axes named for a reader, not by their keys.
    assert!(
        html.contains(">MTU (B)<"),
        "the mtu tag titles its rows by name and unit"
    );
    assert!(
        !html.contains("tag:mtu</th>") && !html.contains("tag:card</th>"),
        "raw keys in a header"
    );
}
