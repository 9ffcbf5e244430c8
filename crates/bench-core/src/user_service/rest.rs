//! A REST target's calls: the request each [`Call`] renders to, and the rules an answer must
//! meet (status in `expect_status`, every `expect_json` pointer present), the same on every
//! HTTP version.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::call::Call;
use crate::failure::{Failure, FailureClass};
use crate::reply::Reply;
use crate::user_service::{DataRows, Endpoint, IdRange, RequestMix, RestTarget, Sources, Template};

/// A REST target compiled for sending: one request (the short form) or a weighted mix.
#[derive(Debug)]
pub struct RestCalls {
    pub endpoint: Endpoint,
    /// One for the short form; a mix's requests in the file's order.
    requests: Vec<CompiledRequest>,
    /// Which request `seq` sends; `None` for the short form.
    mix: Option<RequestMix>,
    rows: Option<Arc<DataRows>>,
    pub ids: IdRange,
}

/// One request's templates and the rules its answers must meet.
#[derive(Debug)]
struct CompiledRequest {
    /// Upper-case method.
    method: String,
    path: Template,
    /// Lower-case names and value templates, in the file's order.
    headers: Vec<(String, Template)>,
    body: Body,
    expect_status: Vec<u16>,
    expect_json: Vec<String>,
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
    /// Which of the target's requests this is (0 for the short form).
    request: usize,
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

/// The fields one request is compiled from, borrowed from the short form or a mix entry.
struct RequestFields<'a> {
    /// Prefix of error messages: `targets.rest` or `targets.rest.requests.NAME`.
    key: String,
    /// What error messages call the path (`url` for the short form).
    path_key: &'a str,
    method: &'a str,
    path: &'a str,
    headers: BTreeMap<&'a String, &'a String>,
    body: &'a Option<String>,
    body_file: &'a Option<std::path::PathBuf>,
    expect_status: &'a [u16],
    expect_json: &'a [String],
}

impl RestCalls {
    pub fn compile(
        target: &RestTarget,
        sources: &Sources<'_>,
        rows: Option<Arc<DataRows>>,
        ids: IdRange,
    ) -> Result<RestCalls, String> {
        let endpoint = target.endpoint()?;
        let mix = target.mix(ids.seed)?;
        let requests = if target.requests.is_empty() {
            vec![compile_request(
                RequestFields {
                    key: "targets.rest".into(),
                    path_key: "url",
                    method: &target.method,
                    path: &endpoint.path,
                    headers: target.headers.iter().collect(),
                    body: &target.body,
                    body_file: &target.body_file,
                    expect_status: &target.expect_status,
                    expect_json: &target.expect_json,
                },
                sources,
            )?]
        } else {
            let mut unused = Vec::new();
            if endpoint.path != "/" {
                unused.push("a path in url");
            }
            if !target.method.eq_ignore_ascii_case("GET") {
                unused.push("method");
            }
            if target.body.is_some() || target.body_file.is_some() {
                unused.push("body");
            }
            if target.expect_status != [200] {
                unused.push("expect_status");
            }
            if !target.expect_json.is_empty() {
                unused.push("expect_json");
            }
            if !unused.is_empty() {
                return Err(format!(
                    "targets.rest: with [[targets.rest.requests]] give {} per request, not on the target",
                    unused.join(", ")
                ));
            }
            let mut compiled = Vec::with_capacity(target.requests.len());
            for r in &target.requests {
                let mut headers: BTreeMap<&String, &String> = target.headers.iter().collect();
                headers.extend(r.headers.iter());
                let key = format!("targets.rest.requests.{}", r.name);
                if !r.path.starts_with('/') {
                    return Err(format!("{key}.path: '{}' must start with '/'", r.path));
                }
                compiled.push(compile_request(
                    RequestFields {
                        key,
                        path_key: "path",
                        method: &r.method,
                        path: &r.path,
                        headers,
                        body: &r.body,
                        body_file: &r.body_file,
                        expect_status: &r.expect_status,
                        expect_json: &r.expect_json,
                    },
                    sources,
                )?);
            }
            compiled
        };
        Ok(RestCalls {
            endpoint,
            requests,
            mix,
            rows,
            ids,
        })
    }

    /// Which of the target's requests request `seq` sends (always 0 for the short form).
    pub fn request_index(&self, seq: u64) -> usize {
        self.mix.as_ref().map_or(0, |m| m.pick(seq))
    }

    /// Renders the request for `call` into `out` (its buffers are reused).
    pub fn render(&self, call: &Call, out: &mut RenderedRequest) {
        out.request = self.request_index(call.seq);
        let request = &self.requests[out.request];
        let rows = self.rows.as_deref();
        out.path.clear();
        request.path.render(call, rows, &mut out.path);
        out.values.resize_with(request.headers.len(), String::new);
        for ((_, template), value) in request.headers.iter().zip(out.values.iter_mut()) {
            value.clear();
            template.render(call, rows, value);
        }
        out.body.clear();
        out.fixed_body = None;
        match &request.body {
            Body::None => {}
            Body::Template(t) => t.render(call, rows, &mut out.body),
            Body::Bytes(b) => out.fixed_body = Some(b.clone()),
        }
    }

    /// The upper-case method of a rendered request.
    pub fn method<'a>(&'a self, rendered: &RenderedRequest) -> &'a str {
        &self.requests[rendered.request].method
    }

    /// The header fields of a rendered request: `(lower-case name, value)`.
    pub fn headers<'a>(
        &'a self,
        rendered: &'a RenderedRequest,
    ) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        self.requests[rendered.request]
            .headers
            .iter()
            .zip(&rendered.values)
            .map(|((name, _), value)| (name.as_str(), value.as_str()))
    }

    /// Whether a rendered request carries a body (then a Content-Length is sent, even for
    /// an empty one).
    pub fn has_body(&self, rendered: &RenderedRequest) -> bool {
        !matches!(self.requests[rendered.request].body, Body::None)
    }

    /// The answer to `call` judged by its request's rules: status in `expect_status` (else
    /// `bad_status`, detail the status), and with `expect_json` a JSON body (else
    /// `bad_body`) holding every pointer (else `missing_data`).
    pub fn judge(
        &self,
        call: &Call,
        status: u16,
        body: &[u8],
        ttfb: Duration,
        total: Duration,
    ) -> Result<Reply, Failure> {
        let request = &self.requests[self.request_index(call.seq)];
        if !request.expect_status.contains(&status) {
            return Err(
                Failure::new(FailureClass::BadStatus, format!("HTTP status {status}"))
                    .with_code(status.to_string()),
            );
        }
        if !request.expect_json.is_empty() {
            let value: serde_json::Value = serde_json::from_slice(body).map_err(|e| {
                Failure::new(FailureClass::BadBody, format!("answer is not JSON: {e}"))
            })?;
            for pointer in &request.expect_json {
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
            messages: 0,
            ttfb,
            total,
            body_bytes: body.len() as u64,
            reopened: None,
            streamed: false,
        })
    }
}

/// Validates and parses one request's fields; errors start with `fields.key`.
fn compile_request(
    fields: RequestFields<'_>,
    sources: &Sources<'_>,
) -> Result<CompiledRequest, String> {
    let key = &fields.key;
    let method = fields.method.to_ascii_uppercase();
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
        return Err(format!(
            "{key}.method '{}' is not an HTTP method",
            fields.method
        ));
    }
    let field = |what: &str, text: &str| {
        let template = Template::parse(text, sources).map_err(|e| format!("{key}.{what}: {e}"))?;
        if template.uses_message() {
            return Err(format!(
                "{key}.{what}: {{{{message}}}} numbers the messages of a gRPC client stream; a REST request is one message"
            ));
        }
        Ok(template)
    };
    let path = field(fields.path_key, fields.path)?;
    let mut headers = Vec::new();
    for (name, value) in fields.headers {
        let lower = name.to_ascii_lowercase();
        let token = !lower.is_empty()
            && lower
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !token || lower.starts_with(':') {
            return Err(format!("{key}.headers: '{name}' is not a header name"));
        }
        if RESERVED.contains(&lower.as_str()) {
            return Err(format!(
                "{key}.headers: '{name}' is set by the client itself"
            ));
        }
        if value.contains(['\r', '\n']) {
            return Err(format!(
                "{key}.headers.{name}: a value may not contain a line break"
            ));
        }
        headers.push((lower, field(&format!("headers.{name}"), value)?));
    }
    let body = match (fields.body, fields.body_file) {
        (Some(_), Some(_)) => return Err(format!("{key}: give body or body_file, not both")),
        (Some(text), None) => Body::Template(field("body", text)?),
        (None, Some(path)) => Body::Bytes(read_body(key, path)?),
        (None, None) => Body::None,
    };
    if fields.expect_status.is_empty() {
        return Err(format!("{key}.expect_status: give at least one status"));
    }
    if let Some(s) = fields
        .expect_status
        .iter()
        .find(|s| !(100..=599).contains(*s))
    {
        return Err(format!("{key}.expect_status: {s} is not an HTTP status"));
    }
    if let Some(p) = fields
        .expect_json
        .iter()
        .find(|p| !p.is_empty() && !p.starts_with('/'))
    {
        return Err(format!(
            "{key}.expect_json: '{p}' is not a JSON pointer (they start with '/')"
        ));
    }
    Ok(CompiledRequest {
        method,
        path,
        headers,
        body,
        expect_status: fields.expect_status.to_vec(),
        expect_json: fields.expect_json.to_vec(),
    })
}

fn read_body(key: &str, path: &Path) -> Result<bytes::Bytes, String> {
    std::fs::read(path)
        .map(bytes::Bytes::from)
        .map_err(|e| format!("{key}.body_file {}: {e}", path.display()))
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

        let mut r = RenderedRequest::default();
        let call = Call {
            id: c.ids.id(1),
            seq: 1,
            worker: 2,
        };
        c.render(&call, &mut r);
        assert_eq!(c.method(&r), "POST");
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
        let call = Call::item(1);
        let ok = br#"{"id": 1, "owner": {"name": "a"}}"#;
        assert!(c.judge(&call, 201, ok, t, t).is_ok());
        let f = c.judge(&call, 404, ok, t, t).unwrap_err();
        assert_eq!(
            (f.class, f.code.as_deref()),
            (FailureClass::BadStatus, Some("404"))
        );
        let f = c.judge(&call, 200, b"{\"id\":", t, t).unwrap_err();
        assert_eq!(f.class, FailureClass::BadBody);
        let f = c
            .judge(&call, 200, br#"{"id": 1, "owner": {}}"#, t, t)
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

    #[test]
    fn a_mix_renders_and_judges_each_request_by_its_own_fields() {
        let c = calls(
            r#"
            [rest]
            url = "https://svc:8443"
            headers = { accept = "application/json", "x-a" = "target" }
            [[rest.requests]]
            name = "get"
            weight = 3
            path = "/items/{{id}}"
            expect_json = ["/id"]
            [[rest.requests]]
            name = "create"
            method = "POST"
            path = "/items"
            headers = { "x-a" = "request" }
            body = '{"seq": {{seq}}}'
            expect_status = [201]
            "#,
        )
        .unwrap();
        let t = Duration::from_micros(5);
        let mut seen = [false; 2];
        for seq in 0..200 {
            let call = Call {
                id: 9,
                seq,
                worker: 0,
            };
            let mut r = RenderedRequest::default();
            c.render(&call, &mut r);
            let i = c.request_index(seq);
            seen[i] = true;
            let headers: Vec<_> = c.headers(&r).collect();
            if i == 0 {
                assert_eq!((c.method(&r), r.path.as_str()), ("GET", "/items/9"));
                assert!(!c.has_body(&r));
                assert_eq!(headers, [("accept", "application/json"), ("x-a", "target")]);
                assert!(c.judge(&call, 200, br#"{"id": 9}"#, t, t).is_ok());
                assert!(c.judge(&call, 201, br#"{"id": 9}"#, t, t).is_err());
            } else {
                assert_eq!((c.method(&r), r.path.as_str()), ("POST", "/items"));
                assert_eq!(r.body(), format!(r#"{{"seq": {seq}}}"#).as_bytes());
                assert_eq!(
                    headers,
                    [("accept", "application/json"), ("x-a", "request")]
                );
                // No expect_json on this one: any body passes, but only status 201.
                assert!(c.judge(&call, 201, b"", t, t).is_ok());
                assert!(c.judge(&call, 200, b"", t, t).is_err());
            }
        }
        assert_eq!(seen, [true, true]);
    }

    #[test]
    fn a_mix_refuses_fields_left_on_the_target_and_names_the_request() {
        for (extra, key) in [
            ("method = \"POST\"\n", "method"),
            ("expect_json = [\"/a\"]\n", "expect_json"),
        ] {
            let text = format!(
                "[rest]\nurl = \"https://x\"\n{extra}[[rest.requests]]\nname = \"a\"\npath = \"/a\"\n"
            );
            let e = calls(&text).unwrap_err();
            assert!(e.contains("per request") && e.contains(key), "{e}");
        }
        let e = calls(
            "[rest]\nurl = \"https://x\"\n[[rest.requests]]\nname = \"a\"\npath = \"/{{nope}}\"\n",
        )
        .unwrap_err();
        assert!(e.contains("targets.rest.requests.a.path"), "{e}");
        let e =
            calls("[rest]\nurl = \"https://x\"\n[[rest.requests]]\nname = \"a\"\npath = \"a\"\n")
                .unwrap_err();
        assert!(e.contains("must start with '/'"), "{e}");
    }
}
