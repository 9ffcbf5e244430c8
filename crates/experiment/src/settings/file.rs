//! Reading an experiment file: TOML into one [`Knobs`] layer, errors naming the file, key,
//! line and column; and finding the line (and column) that set a key, for validation errors.

use std::path::Path;

use super::knobs::Knobs;

/// Reads an experiment file; errors name the file, and for TOML the key, line and column.
pub fn read(path: &Path) -> Result<(String, Knobs), String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: cannot read experiment file: {e}", path.display()))?;
    let knobs = toml::from_str(&text).map_err(|e| {
        let message = did_you_mean(&e.message().replace('\n', " "));
        let Some(span) = e.span() else {
            return format!("{}: {message}", path.display());
        };
        let before = &text[..span.start.min(text.len())];
        let line_no = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before.len() - line_start + 1;
        // Name the key whose value is wrong (serde's message names only the type).
        let line = text[line_start..].lines().next().unwrap_or("");
        let key = line
            .split_once('=')
            .map(|(k, _)| k.trim())
            .filter(|k| !k.is_empty() && !message.contains(&format!("`{k}`")));
        match key {
            Some(key) => format!("{}:{line_no}:{column}: {key}: {message}", path.display()),
            None => format!("{}:{line_no}:{column}: {message}", path.display()),
        }
    })?;
    let mut knobs: Knobs = knobs;
    if let (Some(targets), Some(dir)) = (knobs.targets.as_mut(), path.parent()) {
        targets.rebase(dir);
    }
    Ok((text, knobs))
}

/// serde's "unknown field `x`, expected one of `a`, `b`, …" (every key of the table) as
/// "unknown key `x`: did you mean `y`?" with the nearest key, or without a guess when none
/// is near; other messages unchanged.
fn did_you_mean(message: &str) -> String {
    let Some(rest) = message.strip_prefix("unknown field `") else {
        return message.to_string();
    };
    let Some((unknown, expected)) = rest.split_once('`') else {
        return message.to_string();
    };
    let keys: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    match nearest(unknown, &keys) {
        Some(key) => format!("unknown key `{unknown}`: did you mean `{key}`?"),
        None => format!(
            "unknown key `{unknown}` (none of the {} keys is close; `runner --help` lists them)",
            keys.len()
        ),
    }
}

/// [`key_line`] with the 1-based column where the key starts on that line.
pub fn key_position(text: &str, variant: Option<&str>, key: &str) -> Option<(usize, usize)> {
    let line = key_line(text, variant, key)?;
    let content = text.lines().nth(line - 1)?;
    let column = content.len() - content.trim_start().len() + 1;
    Some((line, column))
}

/// The 1-based line of an experiment file's TOML `text` that sets `key`: inside the
/// `[[variants]]` table named `variant` when given and it sets the key there, else at the top
/// level. `None` when no line sets it (a default, or a form this textual search misses).
pub fn key_line(text: &str, variant: Option<&str>, key: &str) -> Option<usize> {
    /// One TOML table: its header's line (0 for the top level), the variant it names (`None`
    /// for the top level) and its `(line number, trimmed line)`s.
    struct Table<'a> {
        header: usize,
        name: Option<String>,
        lines: Vec<(usize, &'a str)>,
    }
    impl Table<'_> {
        fn sets(&self, key: &str) -> Option<usize> {
            self.lines.iter().find_map(|(n, l)| {
                let (k, _) = l.split_once('=')?;
                (k.trim().trim_matches('"') == key).then_some(*n)
            })
        }
    }
    let mut tables = vec![Table {
        header: 0,
        name: None,
        lines: Vec::new(),
    }];
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') && !trimmed.contains('=') {
            tables.push(Table {
                header: i + 1,
                name: Some(String::new()),
                lines: Vec::new(),
            });
            continue;
        }
        let table = tables.last_mut().expect("top level");
        table.lines.push((i + 1, trimmed));
        if let (Some(name), Some((k, v))) = (&mut table.name, trimmed.split_once('=')) {
            if k.trim() == "name" {
                let quoted = v.trim().trim_start_matches(['"', '\'']);
                *name = quoted.split(['"', '\'']).next().unwrap_or("").to_string();
            }
        }
    }
    let named = |v| tables.iter().filter(move |t| t.name.as_deref() == Some(v));
    if key == "variants" {
        return match variant {
            Some(v) => named(v).next().map(|t: &Table| t.header),
            None => tables
                .iter()
                .find(|t| t.name.is_some())
                .map(|t| t.header)
                .or_else(|| tables[0].sets(key)),
        };
    }
    variant
        .and_then(|v| named(v).find_map(|t| t.sets(key)))
        .or_else(|| tables[0].sets(key))
}

/// The candidate nearest to `word` by edit distance (a typo of it), if one is near enough:
/// at most a third of the word's length (and 1 for short words) away.
pub fn nearest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).max(1);
    candidates
        .iter()
        .map(|c| (edit_distance(word, c), *c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Levenshtein distance (insertions, deletions, substitutions), over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}
