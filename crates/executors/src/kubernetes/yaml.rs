//! A block-style YAML writer for JSON values, enough for Kubernetes manifests. Every string is
//! written double-quoted with JSON's escapes (valid YAML), so no value is ever read back as
//! another type (`"0400"`, `"true"`, `"None"` stay strings); keys are quoted when they are not
//! plain words.

use serde_json::Value;

/// `value` as a YAML document (ending in a newline).
pub fn to_string(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(map) if !map.is_empty() => write_map(&mut out, map, 0),
        Value::Array(items) if !items.is_empty() => write_list(&mut out, items, 0),
        scalar => {
            out.push_str(&inline(scalar));
            out.push('\n');
        }
    }
    out
}

fn inline(value: &Value) -> String {
    match value {
        Value::Object(_) => "{}".into(),
        Value::Array(_) => "[]".into(),
        // JSON's quoting is YAML's double-quoted style.
        other => other.to_string(),
    }
}

fn key(k: &str) -> String {
    let plain = !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
        && k.chars().next().is_some_and(|c| c.is_ascii_alphabetic());
    if plain {
        k.to_string()
    } else {
        Value::String(k.to_string()).to_string()
    }
}

fn nested(value: &Value) -> bool {
    match value {
        Value::Object(m) => !m.is_empty(),
        Value::Array(a) => !a.is_empty(),
        _ => false,
    }
}

fn write_map(out: &mut String, map: &serde_json::Map<String, Value>, indent: usize) {
    let pad = " ".repeat(indent);
    for (k, v) in map {
        out.push_str(&pad);
        out.push_str(&key(k));
        out.push(':');
        write_value(out, v, indent);
    }
}

/// After `key:` (or `- `): a scalar on the line, or a nested block below.
fn write_value(out: &mut String, v: &Value, indent: usize) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            out.push('\n');
            write_map(out, m, indent + 2);
        }
        Value::Array(a) if !a.is_empty() => {
            out.push('\n');
            write_list(out, a, indent + 2);
        }
        scalar => {
            out.push(' ');
            out.push_str(&inline(scalar));
            out.push('\n');
        }
    }
}

fn write_list(out: &mut String, items: &[Value], indent: usize) {
    let pad = " ".repeat(indent);
    for item in items {
        out.push_str(&pad);
        out.push('-');
        match item {
            // `- key: value` with the map's other keys aligned under the first.
            Value::Object(m) if !m.is_empty() => {
                let mut first = true;
                for (k, v) in m {
                    if first {
                        out.push(' ');
                        first = false;
                    } else {
                        out.push_str(&pad);
                        out.push_str("  ");
                    }
                    out.push_str(&key(k));
                    out.push(':');
                    write_value(out, v, indent + 2);
                }
            }
            v if nested(v) => {
                out.push('\n');
                write_list(out, v.as_array().expect("nested list"), indent + 2);
            }
            scalar => {
                out.push(' ');
                out.push_str(&inline(scalar));
                out.push('\n');
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_nested_maps_lists_and_quoted_strings() {
        // serde_json keeps keys sorted (no preserve_order).
        let v = serde_json::json!({
            "apiVersion": "v1",
            "metadata": { "labels": { "app.kubernetes.io/name": "x", "9x": "0400" } },
            "spec": { "containers": [ { "name": "a", "args": ["serve", "--plaintext"], "n": 3 } ], "empty": {}, "none": [] , "ok": true }
        });
        let text = to_string(&v);
        assert_eq!(
            text,
            "apiVersion: \"v1\"\nmetadata:\n  labels:\n    \"9x\": \"0400\"\n    app.kubernetes.io/name: \"x\"\nspec:\n  containers:\n    - args:\n        - \"serve\"\n        - \"--plaintext\"\n      n: 3\n      name: \"a\"\n  empty: {}\n  none: []\n  ok: true\n"
        );
    }
}
