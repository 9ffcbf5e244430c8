//! The paper's prose as minijinja templates (`templates/*.md`): a section's sentences live in
//! its template, and the code hands it only values it has already computed and formatted, so
//! a template never does arithmetic or chooses a number's format.
//!
//! Each template's text is its output, character for character: a block tag's own line break
//! is dropped (`trim_blocks`), and a file's last line break is kept.

use std::sync::OnceLock;

use anyhow::Context;
use minijinja::Environment;
use serde::Serialize;

/// The templated sections, by name.
const TEMPLATES: [(&str, &str); 7] = [
    ("header.md", include_str!("../templates/header.md")),
    ("setup.md", include_str!("../templates/setup.md")),
    ("figures.md", include_str!("../templates/figures.md")),
    ("memory.md", include_str!("../templates/memory.md")),
    (
        "reference_sweep.md",
        include_str!("../templates/reference_sweep.md"),
    ),
    ("beyond_500.md", include_str!("../templates/beyond_500.md")),
    ("breakdown.md", include_str!("../templates/breakdown.md")),
];

fn environment() -> &'static Environment<'static> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_keep_trailing_newline(true);
        for (name, source) in TEMPLATES {
            env.add_template(name, source)
                .unwrap_or_else(|e| panic!("templates/{name} does not parse: {e}"));
        }
        env
    })
}

/// Appends the section `name` rendered with `values` to `out`.
pub(crate) fn render(out: &mut String, name: &str, values: impl Serialize) -> anyhow::Result<()> {
    let text = environment()
        .get_template(name)
        .and_then(|t| t.render(values))
        .with_context(|| format!("cannot render templates/{name}"))?;
    out.push_str(&text);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_parses_and_block_lines_leave_no_blank_line() {
        let mut out = String::new();
        render(
            &mut out,
            "figures.md",
            minijinja::context! {
                reference => "r",
                out_dir => "o",
                figures => vec![minijinja::context! { caption => "c", file => "f.png" }],
            },
        )
        .unwrap();
        assert_eq!(
            out,
            "Figures (from `python3 scripts/plot.py r --out o/figures`):\n\n![c](figures/f.png)\n\n"
        );
        assert!(render(&mut String::new(), "no-such.md", ()).is_err());
    }

    #[test]
    fn memory_without_fits_says_why_in_one_paragraph() {
        let mut out = String::new();
        let fits: Vec<()> = Vec::new();
        render(
            &mut out,
            "memory.md",
            minijinja::context! { run => "r", min_levels => 3, fits },
        )
        .unwrap();
        let paragraphs: Vec<&str> = out.split("\n\n").collect();
        assert_eq!(paragraphs.len(), 3, "{out:?}");
        assert!(paragraphs[0].starts_with("Memory per open connection (KB)"));
        assert!(paragraphs[0].contains("from `r`"));
        assert_eq!(
            paragraphs[1],
            "No fit: this run has fewer than 3 concurrency levels per stack."
        );
        assert_eq!(paragraphs[2], "", "ends with one blank line: {out:?}");
    }
}
