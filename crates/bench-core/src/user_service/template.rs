//! Templates of a target's requests: text with `{{id}}`, `{{worker}}`, `{{seq}}`,
//! `{{message}}` (a gRPC client stream's message number), `{{env.NAME}}` and `{{row.COLUMN}}`
//! placeholders, parsed once and rendered per request
//! into a reused buffer (no allocation on the hot path).

use std::fmt::Write;

use crate::call::Call;
use crate::user_service::data::DataRows;

/// One piece of a template.
#[derive(Debug, Clone, PartialEq)]
enum Part {
    Text(Box<str>),
    Id,
    Worker,
    Seq,
    /// The number of the message in a gRPC client stream (0, 1, …).
    Message,
    /// A column of the data file's row for this request.
    Row(usize),
}

/// A parsed template. `{{env.NAME}}` is resolved when parsed (its value is then text that
/// is never written anywhere else), so a template that used one is marked [`Template::secret`].
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    parts: Vec<Part>,
    secret: bool,
    source: String,
}

/// Where a template's values come from besides the call: the environment and the data file.
pub struct Sources<'a> {
    pub env: &'a dyn Fn(&str) -> Option<String>,
    pub rows: Option<&'a DataRows>,
}

impl Sources<'_> {
    /// The process environment and no data file.
    pub fn env_only() -> Sources<'static> {
        Sources {
            env: &|name| std::env::var(name).ok(),
            rows: None,
        }
    }
}

impl Template {
    /// Parses `text`; an unknown placeholder, an unset environment variable or a column the
    /// data file does not have is an error naming it.
    pub fn parse(text: &str, sources: &Sources<'_>) -> Result<Template, String> {
        let mut parts = Vec::new();
        let mut secret = false;
        let mut rest = text;
        let mut literal = String::new();
        while let Some(open) = rest.find("{{") {
            literal.push_str(&rest[..open]);
            let after = &rest[open + 2..];
            let close = after
                .find("}}")
                .ok_or_else(|| format!("'{{{{' without '}}}}' in template '{text}'"))?;
            let name = after[..close].trim();
            rest = &after[close + 2..];
            let part = match name {
                "id" => Part::Id,
                "worker" => Part::Worker,
                "seq" => Part::Seq,
                "message" => Part::Message,
                _ if name.starts_with("env.") => {
                    let var = &name[4..];
                    let value = (sources.env)(var).ok_or_else(|| {
                        format!("template '{text}': environment variable {var} is not set")
                    })?;
                    secret = true;
                    literal.push_str(&value);
                    continue;
                }
                _ if name.starts_with("row.") => {
                    let column = &name[4..];
                    let rows = sources.rows.ok_or_else(|| {
                        format!("template '{text}': {{{{row.{column}}}}} needs a data file (targets.data)")
                    })?;
                    Part::Row(rows.column(column).ok_or_else(|| {
                        format!(
                            "template '{text}': the data file has no column '{column}' (it has {})",
                            rows.columns().join(", ")
                        )
                    })?)
                }
                _ => {
                    return Err(format!(
                        "template '{text}': unknown placeholder {{{{{name}}}}} (expected id, worker, seq, message, env.NAME or row.COLUMN)"
                    ))
                }
            };
            if !literal.is_empty() {
                parts.push(Part::Text(std::mem::take(&mut literal).into()));
            }
            parts.push(part);
        }
        literal.push_str(rest);
        if !literal.is_empty() {
            parts.push(Part::Text(literal.into()));
        }
        Ok(Template {
            parts,
            secret,
            source: text.to_string(),
        })
    }

    /// A template of fixed text.
    pub fn text(text: &str) -> Template {
        Template {
            parts: if text.is_empty() {
                Vec::new()
            } else {
                vec![Part::Text(text.into())]
            },
            secret: false,
            source: text.to_string(),
        }
    }

    /// Appends the rendering for `call` to `out` (`{{message}}` as 0).
    pub fn render(&self, call: &Call, rows: Option<&DataRows>, out: &mut String) {
        self.render_message(call, 0, rows, out);
    }

    /// Appends the rendering for message `message` of `call`'s stream to `out`.
    pub fn render_message(
        &self,
        call: &Call,
        message: u32,
        rows: Option<&DataRows>,
        out: &mut String,
    ) {
        for part in &self.parts {
            match part {
                Part::Text(t) => out.push_str(t),
                Part::Id => write!(out, "{}", call.id).expect("writing to a String"),
                Part::Worker => write!(out, "{}", call.worker).expect("writing to a String"),
                Part::Seq => write!(out, "{}", call.seq).expect("writing to a String"),
                Part::Message => write!(out, "{message}").expect("writing to a String"),
                Part::Row(column) => {
                    if let Some(rows) = rows {
                        out.push_str(rows.value(call.seq, *column));
                    }
                }
            }
        }
    }

    /// The rendering for `call` as a new string (for checks and tests, not the hot path).
    pub fn render_string(&self, call: &Call, rows: Option<&DataRows>) -> String {
        let mut out = String::new();
        self.render(call, rows, &mut out);
        out
    }

    /// Whether every request renders the same bytes (so they can be prepared once).
    pub fn is_constant(&self) -> bool {
        self.parts.iter().all(|p| matches!(p, Part::Text(_)))
    }

    /// Whether it numbers the messages of a stream (`{{message}}`).
    pub fn uses_message(&self) -> bool {
        self.parts.contains(&Part::Message)
    }

    /// Whether an environment variable's value is in it (then it is never written out).
    pub fn secret(&self) -> bool {
        self.secret
    }

    /// The template as written, with `{{env.NAME}}` still a placeholder (safe to record).
    pub fn source(&self) -> &str {
        &self.source
    }
}

/// Placeholders of a template text, for validation without parsing (`{{env.X}}` → `env.X`).
pub fn placeholders(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else { break };
        out.push(after[..close].trim());
        rest = &after[close + 2..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        (name == "TOKEN").then(|| "s3cret".to_string())
    }

    #[test]
    fn renders_every_placeholder_and_marks_secrets() {
        let sources = Sources {
            env: &env,
            rows: None,
        };
        let t = Template::parse("/v1/{{id}}/w{{ worker }}?s={{seq}}", &sources).unwrap();
        let call = Call {
            id: 42,
            seq: 7,
            worker: 3,
        };
        assert_eq!(t.render_string(&call, None), "/v1/42/w3?s=7");
        assert!(!t.secret() && !t.is_constant());
        let auth = Template::parse("Bearer {{env.TOKEN}}", &sources).unwrap();
        assert_eq!(auth.render_string(&call, None), "Bearer s3cret");
        assert!(auth.secret() && auth.is_constant());
        assert_eq!(auth.source(), "Bearer {{env.TOKEN}}");
        let part = Template::parse("{\"name\": \"part {{message}} of {{id}}\"}", &sources).unwrap();
        assert!(part.uses_message() && !t.uses_message());
        let mut out = String::new();
        part.render_message(&call, 5, None, &mut out);
        assert_eq!(out, "{\"name\": \"part 5 of 42\"}");
        assert_eq!(
            part.render_string(&call, None),
            "{\"name\": \"part 0 of 42\"}"
        );
    }

    #[test]
    fn errors_name_the_placeholder() {
        let sources = Sources {
            env: &env,
            rows: None,
        };
        let e = Template::parse("{{nope}}", &sources).unwrap_err();
        assert!(e.contains("{{nope}}"), "{e}");
        let e = Template::parse("{{env.MISSING}}", &sources).unwrap_err();
        assert!(e.contains("MISSING is not set"), "{e}");
        let e = Template::parse("{{row.sku}}", &sources).unwrap_err();
        assert!(e.contains("data file"), "{e}");
        assert!(Template::parse("{{id", &sources).is_err());
    }
}
