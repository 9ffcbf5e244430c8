//! report.html as a browser draws it: the baseline's winner marks must show without any emoji
//! font (headless Chromium on Debian has none, and the old ✅ rendered as an empty box).

mod common;

use std::path::Path;
use std::process::Command;

use common::{output_text, runner, workspace};

/// The fill of the winner mark in templates/report.html; nothing else on the page uses it.
const MARK_RGB: [u8; 3] = [0x00, 0x96, 0x5a];

/// The browser binary, if installed.
fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            Command::new(b)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

/// Pixels of `png` within a small distance of `rgb` (anti-aliased edges excluded).
fn pixels_of_colour(png: &Path, rgb: [u8; 3]) -> usize {
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(png).expect("screenshot exists"),
    ));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("size")];
    let info = reader.next_frame(&mut buf).expect("one frame");
    let channels = info.color_type.samples();
    assert_eq!(info.bit_depth, png::BitDepth::Eight, "8-bit screenshot");
    assert!(channels >= 3, "colour screenshot: {:?}", info.color_type);
    buf[..info.buffer_size()]
        .chunks_exact(channels)
        .filter(|p| (0..3).all(|i| p[i].abs_diff(rgb[i]) <= 6))
        .count()
}

#[test]
fn winner_marks_are_drawn_without_an_emoji_font() {
    let Some(browser) = chromium() else {
        assert!(
            std::env::var_os("TBENCH_REQUIRE_CHROMIUM").is_none(),
            "chromium is required here (.ci/run installs it)"
        );
        eprintln!("skipped: no chromium installed (apt-get install chromium)");
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    for name in ["cells.csv", "failures.csv", "manifest.json"] {
        std::fs::copy(
            workspace().join("results/reference").join(name),
            dir.path().join(name),
        )
        .expect("copy the reference run");
    }
    let out = runner().arg("report").arg(dir.path()).output().unwrap();
    assert!(out.status.success(), "{}", output_text(&out));
    let shot = dir.path().join("shot.png");
    let profile = dir.path().join("profile");
    // Tall enough for the baseline tables, which follow the peak-load summary.
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", shot.display()))
        .arg("--window-size=1400,4000")
        .arg(format!(
            "file://{}",
            dir.path().join("report.html").display()
        ))
        .output()
        .expect("chromium runs");
    assert!(shot.is_file(), "no screenshot: {}", output_text(&out));
    // The reference's baselines mark at least a dozen cells, each a disc of ≈ 130 pixels at
    // 0.9 em; 400 pixels rule out a stray pixel of a chart while allowing font-size changes.
    let marked = pixels_of_colour(&shot, MARK_RGB);
    assert!(
        marked >= 400,
        "only {marked} pixels of the mark's colour in {}",
        shot.display()
    );
}
