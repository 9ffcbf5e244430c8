//! Helpers for the runner's end-to-end tests: run the real binary, read its CSVs.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The runner binary, started in cargo's scratch folder for tests: what it writes relative to
/// where it runs (`certs/`, `results/` when no `--certs`/`--out` is given) stays out of the
/// source tree.
pub fn runner() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_runner"));
    command.current_dir(env!("CARGO_TARGET_TMPDIR"));
    command
}

/// The run flags of the smallest measured run: one reuse cell of one worker and 20 requests,
/// no baseline, one repetition (give `--stacks` beside them).
pub const ONE_TINY_CELL: [&str; 10] = [
    "--regime",
    "reuse",
    "--concurrency",
    "1",
    "--requests",
    "20",
    "--baseline-seconds",
    "0",
    "--repetitions",
    "1",
];

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The one results directory a run created under `out`.
pub fn results_dir(out: &Path) -> PathBuf {
    let dirs: Vec<_> = std::fs::read_dir(out)
        .expect("out dir exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(
        dirs.len(),
        1,
        "expected one results directory in {out:?}: {dirs:?}"
    );
    dirs[0].clone()
}

/// Rows of a CSV as column → value maps.
pub fn read_csv(path: &Path) -> Vec<HashMap<String, String>> {
    let mut reader = csv::Reader::from_path(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let headers = reader.headers().unwrap().clone();
    reader
        .records()
        .map(|r| {
            let r = r.expect("well-formed CSV row");
            headers
                .iter()
                .zip(r.iter())
                .map(|(h, v)| (h.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

pub fn num(row: &HashMap<String, String>, key: &str) -> f64 {
    row.get(key)
        .unwrap_or_else(|| panic!("column {key} missing"))
        .parse()
        .unwrap_or_else(|_| panic!("column {key} = {:?} is not a number", row[key]))
}

pub fn output_text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A finished runner invocation with its own results and certificate directories.
pub struct Run {
    pub out: tempfile::TempDir,
    pub certs: tempfile::TempDir,
    pub output: Output,
}

impl Run {
    /// The results directory the run created.
    pub fn dir(&self) -> PathBuf {
        results_dir(self.out.path())
    }
    pub fn cells(&self) -> Vec<HashMap<String, String>> {
        read_csv(&self.dir().join("cells.csv"))
    }
}

/// Runs the runner with `args` into fresh directories and asserts that it succeeded.
pub fn run_ok(args: &[&str]) -> Run {
    let out = tempfile::tempdir().unwrap();
    let certs = tempfile::tempdir().unwrap();
    let output = runner()
        .args(args)
        .arg("--out")
        .arg(out.path())
        .arg("--certs")
        .arg(certs.path())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{args:?}: {}",
        output_text(&output)
    );
    Run { out, certs, output }
}

/// Runs the experiment file `toml` into fresh directories, asserts that the run succeeded,
/// and returns the results directory (kept alive by the returned guard).
pub fn run_toml(toml: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("exp.toml");
    std::fs::write(&file, toml).unwrap();
    let out = tmp.path().join("results");
    let output = runner()
        .arg("--experiment")
        .arg(&file)
        .arg("--out")
        .arg(&out)
        .arg("--certs")
        .arg(tmp.path().join("certs"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", output_text(&output));
    let dir = results_dir(&out);
    (tmp, dir)
}

/// Validates the JSON file `json` against `docs/summary.schema.json` with Python's
/// `jsonschema` (Draft 2020-12; the schema itself checked first). `false` when jsonschema is
/// missing and not required; with `TBENCH_REQUIRE_JSONSCHEMA=1` a missing one fails.
pub fn valid_against_summary_schema(json: &Path) -> bool {
    let schema = workspace().join("docs/summary.schema.json");
    let script = "import json, sys, jsonschema\n\
        schema = json.load(open(sys.argv[1]))\n\
        jsonschema.Draft202012Validator.check_schema(schema)\n\
        v = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())\n\
        errors = sorted(v.iter_errors(json.load(open(sys.argv[2]))), key=lambda e: list(e.path))\n\
        for e in errors[:10]: print('/'.join(map(str, e.path)), e.message)\n\
        sys.exit(1 if errors else 0)\n";
    let available = Command::new("python3")
        .args(["-c", "import jsonschema"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !available {
        if std::env::var("TBENCH_REQUIRE_JSONSCHEMA").as_deref() == Ok("1") {
            panic!("Python's jsonschema is required (pip install -r scripts/requirements.txt)");
        }
        eprintln!("note: Python's jsonschema not found (pip install -r scripts/requirements.txt); schema validation skipped");
        return false;
    }
    let o = Command::new("python3")
        .args(["-c", script])
        .arg(&schema)
        .arg(json)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{} does not match docs/summary.schema.json:\n{}",
        json.display(),
        output_text(&o)
    );
    true
}

/// Whether the PNG has a pixel within a few levels of `rgb` (a line drawn in that colour).
pub fn has_colour(png_path: &Path, rgb: [u8; 3]) -> bool {
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(png_path).unwrap(),
    ));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let step = info.color_type.samples();
    buf[..info.buffer_size()]
        .chunks(step)
        .any(|p| p.iter().zip(rgb).all(|(a, b)| a.abs_diff(b) <= 3))
}

/// `runner --resume DIR --certs CERTS`, run to its end.
pub fn resume(dir: &Path, certs: &Path) -> Output {
    runner()
        .arg("--resume")
        .arg(dir)
        .arg("--certs")
        .arg(certs)
        .output()
        .unwrap()
}

/// A `runner agent` on a loopback address (port chosen by the kernel), killed when dropped.
pub struct Agent {
    pub child: std::process::Child,
    pub addr: String,
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Agent {
    /// An agent on 127.0.0.1.
    pub fn start(certs: &Path, token: &str) -> Agent {
        Agent::start_on("127.0.0.1", certs, token)
    }

    /// An agent listening on `ip` (a pod's address in the Kubernetes tests).
    pub fn start_on(ip: &str, certs: &Path, token: &str) -> Agent {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_runner"))
            .args(["agent", "--listen", &format!("{ip}:0"), "--certs"])
            .arg(certs)
            .env(executors::agent::TOKEN_ENV, token)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .expect("runner agent starts");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let ready: serde_json::Value = serde_json::from_str(&line).expect("ready line");
        Agent {
            child,
            addr: ready["agent"].as_str().unwrap().to_string(),
        }
    }

    /// Its address, parsed.
    pub fn socket_addr(&self) -> std::net::SocketAddr {
        self.addr.parse().expect("an agent's address")
    }
}

/// The runner's flags for a cell with no warm-up, no baseline and one repetition: the tests'
/// usual shape around a request count of their own.
pub const NO_WARMUP_ONE_REPETITION: [&str; 6] = [
    "--warmup-fraction",
    "0",
    "--baseline-seconds",
    "0",
    "--repetitions",
    "1",
];
