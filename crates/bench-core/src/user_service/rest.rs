//! A REST target's calls: the request each [`Call`] renders to, and the rules an answer must
//! meet (status in `expect_status`, every `expect_json` pointer present), the same on every
//! HTTP version.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::call::Call;
use crate::failure::{Failure, FailureClass};
use crate::user_service::{DataRows, Endpoint, IdRange, RestTarget, Sources, Template};
use crate::Reply;

/// A REST target compiled for sending.
#[derive(Debug)]
pub struct RestCalls {
    /// Upper-case method.
    pub method: String,
    pub endpoint: Endpoint,
    path: Template,
    /// Lower-case names and value templates, in the file's order.
    headers: Vec<(String, Template)>,
    body: Body,
    expect_status: Vec<u16>,
    expect_json: Vec<String>,
    rows: Option<Arc<DataRows>>,
    pub ids: IdRange,
}

#[derive(Debug)]
enum Body {
    None,
    Template(Template),
    Bytes(bytes::Bytes),
}

/// One request's rendered parts, in buffers a connection keeps and reuses.
#[derive(Debug, Default)]
pub struct RenderedRequest {
    /// Path and query.
    pub path: String,
    values: Vec<String>,
    body: String,
    fixed_body: Option<bytes::Bytes>,
}

impl RenderedRequest {
    pub fn body(&self) -> &[u8] {
        match &self.fixed_body {
            Some(b) => b,
            None => self.body.as_bytes(),
        }
    }
}

/// Headers a client sets itself; a target may not set them.
const RESERVED: [&str; 8] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "te",
    "proxy-connection",
];

impl RestCalls {
    pub fn compile(
        target: &RestTarget,
        sources: &Sources<'_>,
        rows: Option<Arc<DataRows>>,
        ids: IdRange,
    ) -> Result<RestCalls, String> {
        let endpoint = target.endpoint()?;
        let method = target.method.to_ascii_uppercase();
        if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
            return Err(format!(
                "targets.rest.method '{}' is not an HTTP method",
                target.method
            ));
        }
        let field = |what: &str, text: &str| {
            Template::parse(text, sources).map_err(|e| format!("targets.rest.{what}: {e}"))
        };
        let path = field("url", &endpoint.path)?;
        let mut headers = Vec::new();
        for (name, value) in &target.headers {
            let lower = name.to_ascii_lowercase();
            let token = !lower.is_empty()
                && lower
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
            if !token || lower.starts_with(':') {
                return Err(format!(
                    "targets.rest.headers: '{name}' is not a header name"
                ));
            }
            if RESERVED.contains(&lower.as_str()) {
                return Err(format!(
                    "targets.rest.headers: '{name}' is set by the client itself"
                ));
            }
            if value.contains(['\r', '\n']) {
                return Err(format!(
                    "targets.rest.headers.{name}: a value may not contain a line break"
                ));
            }
            headers.push((lower, field(&format!("headers.{name}"), value)?));
        }
        let body = match (&target.body, &target.body_file) {
            (Some(_), Some(_)) => {
                return Err("targets.rest: give body or body_file, not both".into())
            }
            (Some(text), None) => Body::Template(field("body", text)?),
            (None, Some(path)) => Body::Bytes(read_body(path)?),
            (None, None) => Body::None,
        };
        if target.expect_status.is_empty() {
            return Err("targets.rest.expect_status: give at least one status".into());
        }
        if let Some(s) = target
            .expect_status
            .iter()
            .find(|s| !(100..=599).contains(*s))
        {
            return Err(format!(
                "targets.rest.expect_status: {s} is not an HTTP status"
            ));
        }
        if let Some(p) = target
            .expect_json
            .iter()
            .find(|p| !p.is_empty() && !p.starts_with('/'))
        {
            return Err(format!(
                "targets.rest.expect_json: '{p}' is not a JSON pointer (they start with '/')"
            ));
        }
        Ok(RestCalls {
            method,
            endpoint,
            path,
            headers,
            body,
            expect_status: target.expect_status.clone(),
            expect_json: target.expect_json.clone(),
            rows,
            ids,
        })
    }

    /// Renders the request for `call` into `out` (its buffers are reused).
    pub fn render(&self, call: &Call, out: &mut RenderedRequest) {
        let rows = self.rows.as_deref();
        out.path.clear();
        self.path.render(call, rows, &mut out.path);
        out.values.resize_with(self.headers.len(), String::new);
        for ((_, template), value) in self.headers.iter().zip(out.values.iter_mut()) {
            value.clear();
            template.render(call, rows, value);
        }
        out.body.clear();
        out.fixed_body = None;
        match &self.body {
            Body::None => {}
            Body::Template(t) => t.render(call, rows, &mut out.body),
            Body::Bytes(b) => out.fixed_body = Some(b.clone()),
        }
    }

    /// The header fields of a rendered request: `(lower-case name, value)`.
    pub fn headers<'a>(
        &'a self,
        rendered: &'a RenderedRequest,
    ) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        self.headers
            .iter()
            .zip(&rendered.values)
            .map(|((name, _), value)| (name.as_str(), value.as_str()))
    }

    /// Whether requests carry a body (then a Content-Length is sent, even for an empty one).
    pub fn has_body(&self) -> bool {
        !matches!(self.body, Body::None)
    }

    /// The answer judged: status in `expect_status` (else `bad_status`, detail the status),
    /// and with `expect_json` a JSON body (else `bad_body`) holding every pointer (else
    /// `missing_data`).
    pub fn judge(
        &self,
        status: u16,
        body: &[u8],
        ttfb: Duration,
        total: Duration,
    ) -> Result<Reply, Failure> {
        if !self.expect_status.contains(&status) {
            return Err(
                Failure::new(FailureClass::BadStatus, format!("HTTP status {status}"))
                    .with_code(status.to_string()),
            );
        }
        if !self.expect_json.is_empty() {
            let value: serde_json::Value = serde_json::from_slice(body).map_err(|e| {
                Failure::new(FailureClass::BadBody, format!("answer is not JSON: {e}"))
            })?;
            for pointer in &self.expect_json {
                if value.pointer(pointer).is_none() {
                    return Err(Failure::new(
                        FailureClass::MissingData,
                        format!("JSON pointer {pointer} is missing"),
                    )
                    .with_code(pointer.clone()));
                }
            }
        }
        Ok(Reply {
            ttfb,
            total,
            body_bytes: body.len() as u64,
            reopened: None,
        })
    }
}

fn read_body(path: &Path) -> Result<bytes::Bytes, String> {
    std::fs::read(path)
        .map(bytes::Bytes::from)
        .map_err(|e| format!("targets.rest.body_file {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::user_service::Targets;

    fn calls(toml_text: &str) -> Result<Arc<RestCalls>, String> {
        let targets: Targets = toml::from_str(toml_text).map_err(|e| e.to_string())?;
        let env = |name: &str| (name == "TOKEN").then(|| "t0k".to_string());
        match targets.calls(crate::user_service::Api::Rest, &env)? {
            Some(crate::user_service::Calls::Rest(c)) => Ok(c),
            _ => Err("no rest calls".into()),
        }
    }

    #[test]
    fn renders_path_headers_and_body_per_call() {
        let c = calls(
            r#"
            [ids]
            from = 5
            to = 6
            [rest]
            url = "https://svc:8443/v1/items/{{id}}?w={{worker}}"
            method = "post"
            headers = { Authorization = "Bearer {{env.TOKEN}}" }
            body = '{"id": {{id}}, "seq": {{seq}}}'
            "#,
        )
        .unwrap();
        assert_eq!(c.method, "POST");
        let mut r = RenderedRequest::default();
        let call = Call {
            id: c.ids.id(1),
            seq: 1,
            worker: 2,
        };
        c.render(&call, &mut r);
        assert_eq!(r.path, "/v1/items/6?w=2");
        assert_eq!(
            c.headers(&r).collect::<Vec<_>>(),
            [("authorization", "Bearer t0k")]
        );
        assert_eq!(r.body(), br#"{"id": 6, "seq": 1}"#);
    }

    #[test]
    fn judges_status_and_json_pointers_into_their_classes() {
        let c = calls(
            r#"
            [rest]
            url = "http://127.0.0.1:1/x"
            expect_status = [200, 201]
            expect_json = ["/id", "/owner/name"]
            "#,
        )
        .unwrap();
        let t = Duration::from_micros(5);
        let ok = br#"{"id": 1, "owner": {"name": "a"}}"#;
        assert!(c.judge(201, ok, t, t).is_ok());
        let f = c.judge(404, ok, t, t).unwrap_err();
        assert_eq!(
            (f.class, f.code.as_deref()),
            (FailureClass::BadStatus, Some("404"))
        );
        let f = c.judge(200, b"{\"id\":", t, t).unwrap_err();
        assert_eq!(f.class, FailureClass::BadBody);
        let f = c
            .judge(200, br#"{"id": 1, "owner": {}}"#, t, t)
            .unwrap_err();
        assert_eq!(f.class, FailureClass::MissingData);
        assert!(f.detail.contains("/owner/name"), "{}", f.detail);
    }

    #[test]
    fn bad_targets_are_refused_with_the_key() {
        for (text, key) in [
            ("[rest]\nurl = \"ftp://x\"", "targets.rest.url"),
            (
                "[rest]\nurl = \"https://x\"\nmethod = \"G T\"",
                "targets.rest.method",
            ),
            (
                "[rest]\nurl = \"https://x\"\nheaders = { host = \"y\" }",
                "targets.rest.headers",
            ),
            (
                "[rest]\nurl = \"https://x\"\nexpect_json = [\"id\"]",
                "targets.rest.expect_json",
            ),
            ("[rest]\nurl = \"https://x/{{nope}}\"", "targets.rest.url"),
            (
                "[rest]\nurl = \"https://x\"\nheaders = { a = \"{{env.UNSET}}\" }",
                "targets.rest.headers.a",
            ),
        ] {
            let e = calls(text).unwrap_err();
            assert!(e.contains(key), "{text}: {e}");
        }
    }
}
