//! A gRPC target's calls as far as they do not depend on the message types: the method's
//! path, the request and metadata templates, where the descriptors come from and the fields
//! an answer must have. The stack resolves the descriptors and encodes the messages.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::call::Call;
use crate::user_service::value_check::ValueCheck;
use crate::user_service::{
    CheckMessages, DataRows, Endpoint, GrpcTarget, IdRange, RequestMix, Sources, Template,
};

/// Where the method's message descriptors come from.
#[derive(Debug, Clone, PartialEq)]
pub enum Descriptors {
    /// `.proto` files compiled at run time, with their import paths.
    Protos {
        files: Vec<PathBuf>,
        import_paths: Vec<PathBuf>,
    },
    /// The server's reflection service.
    Reflection,
}

/// A gRPC target compiled for sending: one call (the short form) or a weighted mix of calls.
#[derive(Debug)]
pub struct GrpcCalls {
    pub endpoint: Endpoint,
    pub descriptors: Descriptors,
    /// One for the short form; a mix's calls in the file's order.
    pub methods: Vec<GrpcMethod>,
    /// With `[[targets.grpc.calls]]`: which call request `seq` makes.
    mix: Option<RequestMix>,
    pub ids: IdRange,
}

/// One method's calls: its path, request and metadata templates and the answer's checks.
#[derive(Debug)]
pub struct GrpcMethod {
    /// Where its settings are in the file, the prefix of every message about them:
    /// `targets.grpc` for the short form, `targets.grpc.calls.NAME` in a mix.
    pub key: String,
    /// `package.Service`.
    pub service: String,
    pub method: String,
    /// `/package.Service/Method`.
    pub path: String,
    request: Template,
    metadata: Vec<(String, Template)>,
    pub expect_fields: Vec<String>,
    /// `expect_values`: each path with its comparison, in path order.
    pub expect_values: Vec<(String, ValueCheck)>,
    /// Request messages per call of a client-streaming or bidi method (1 otherwise).
    pub messages: u32,
    /// When the client ends a call whose answer is a stream (`duration_ms`); `None`: at
    /// the answer's end.
    pub duration: Option<Duration>,
    /// Which messages of a streamed answer the answer checks hold.
    pub check_messages: CheckMessages,
    rows: Option<Arc<DataRows>>,
}

/// Metadata a client sets itself.
const RESERVED: [&str; 6] = [
    "content-type",
    "te",
    "grpc-timeout",
    "grpc-encoding",
    "grpc-accept-encoding",
    "user-agent",
];

/// The per-call settings one method is compiled from, borrowed from the short form or a
/// mix entry.
struct MethodFields<'a> {
    key: String,
    method: &'a str,
    request: &'a str,
    /// The target's metadata, then the call's (which overrides by key).
    metadata: Vec<(&'a String, &'a String)>,
    expect_fields: &'a [String],
    expect_values: &'a BTreeMap<String, String>,
    messages: Option<u32>,
    duration_ms: Option<u64>,
    check_messages: Option<CheckMessages>,
}

/// The longest `duration_ms` a call may have (an hour: a stream kept longer is a soak, and
/// the request timeout must still exceed it).
pub const MAX_CALL_DURATION_MS: u64 = 3_600_000;

impl GrpcCalls {
    pub fn compile(
        target: &GrpcTarget,
        sources: &Sources<'_>,
        rows: Option<Arc<DataRows>>,
        ids: IdRange,
    ) -> Result<GrpcCalls, String> {
        let endpoint = target.endpoint()?;
        let descriptors = match (target.proto.is_empty(), target.reflection) {
            (false, false) => {
                let mut import_paths = target.import_paths.clone();
                for file in &target.proto {
                    if let Some(dir) = file.parent() {
                        let dir = if dir.as_os_str().is_empty() {
                            PathBuf::from(".")
                        } else {
                            dir.to_path_buf()
                        };
                        if !import_paths.contains(&dir) {
                            import_paths.push(dir);
                        }
                    }
                }
                Descriptors::Protos {
                    files: target.proto.clone(),
                    import_paths,
                }
            }
            (true, true) => Descriptors::Reflection,
            (false, true) => {
                return Err("targets.grpc: give proto files or reflection = true, not both".into())
            }
            (true, false) => {
                return Err(
                    "targets.grpc: the messages need a description: give proto = [\"file.proto\"] or reflection = true"
                        .into(),
                )
            }
        };
        let mix = target.mix(ids.seed)?;
        let fields: Vec<MethodFields<'_>> = if target.calls.is_empty() {
            if target.method.is_empty() {
                return Err(
                    "targets.grpc: give the method (package.Service/Method), or several calls as [[targets.grpc.calls]]"
                        .into(),
                );
            }
            vec![MethodFields {
                key: "targets.grpc".into(),
                method: &target.method,
                request: &target.request,
                metadata: target.metadata.iter().collect(),
                expect_fields: &target.expect_fields,
                expect_values: &target.expect_values,
                messages: target.messages,
                duration_ms: target.duration_ms,
                check_messages: target.check_messages,
            }]
        } else {
            // One place per setting: what each call gives is not also given on the target.
            let on_target = [
                ("method", !target.method.is_empty()),
                ("request", target.request != super::default_request()),
                ("expect_fields", !target.expect_fields.is_empty()),
                ("expect_values", !target.expect_values.is_empty()),
                ("messages", target.messages.is_some()),
                ("duration_ms", target.duration_ms.is_some()),
                ("check_messages", target.check_messages.is_some()),
            ];
            if let Some((name, _)) = on_target.iter().find(|(_, given)| *given) {
                return Err(format!(
                    "targets.grpc: with [[targets.grpc.calls]] give {name} per call, not on the target"
                ));
            }
            target
                .calls
                .iter()
                .map(|c| MethodFields {
                    key: format!("targets.grpc.calls.{}", c.name),
                    method: &c.method,
                    request: &c.request,
                    metadata: target
                        .metadata
                        .iter()
                        .filter(|(k, _)| !c.metadata.keys().any(|own| own.eq_ignore_ascii_case(k)))
                        .chain(c.metadata.iter())
                        .collect(),
                    expect_fields: &c.expect_fields,
                    expect_values: &c.expect_values,
                    messages: c.messages,
                    duration_ms: c.duration_ms,
                    check_messages: c.check_messages,
                })
                .collect()
        };
        let methods = fields
            .into_iter()
            .map(|f| GrpcMethod::compile(f, sources, rows.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(GrpcCalls {
            endpoint,
            descriptors,
            methods,
            mix,
            ids,
        })
    }

    /// Which of [`GrpcCalls::methods`] request `seq` calls (always 0 for the short form).
    pub fn method_index(&self, seq: u64) -> usize {
        self.mix.as_ref().map_or(0, |m| m.pick(seq))
    }

    /// The method request `call` makes.
    pub fn method_for(&self, call: &Call) -> &GrpcMethod {
        &self.methods[self.method_index(call.seq)]
    }

    /// The services the calls go to, each once, in the file's order (what reflection asks
    /// for).
    pub fn services(&self) -> Vec<&str> {
        let mut services: Vec<&str> = Vec::new();
        for m in &self.methods {
            if !services.contains(&m.service.as_str()) {
                services.push(&m.service);
            }
        }
        services
    }
}

impl GrpcMethod {
    fn compile(
        fields: MethodFields<'_>,
        sources: &Sources<'_>,
        rows: Option<Arc<DataRows>>,
    ) -> Result<GrpcMethod, String> {
        let key = fields.key;
        let (service, method) = fields
            .method
            .trim_start_matches('/')
            .split_once('/')
            .filter(|(s, m)| !s.is_empty() && !m.is_empty() && !m.contains('/'))
            .ok_or_else(|| {
                format!(
                    "{key}.method '{}': expected package.Service/Method",
                    fields.method
                )
            })?;
        let field = |what: &str, text: &str| {
            let template =
                Template::parse(text, sources).map_err(|e| format!("{key}.{what}: {e}"))?;
            if what != "request" && template.uses_message() {
                return Err(format!(
                    "{key}.{what}: {{{{message}}}} numbers a client stream's request messages; metadata is sent once per call"
                ));
            }
            Ok(template)
        };
        let request = field("request", fields.request)?;
        let mut metadata = Vec::new();
        for (name, value) in fields.metadata {
            let lower = name.to_ascii_lowercase();
            let valid = !lower.is_empty()
                && lower
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b));
            if !valid {
                return Err(format!("{key}.metadata: '{name}' is not a metadata key"));
            }
            if RESERVED.contains(&lower.as_str()) || lower.starts_with("grpc-") {
                return Err(format!(
                    "{key}.metadata: '{name}' is set by the client itself"
                ));
            }
            if lower.ends_with("-bin") {
                return Err(format!(
                    "{key}.metadata: '{name}': binary metadata is not supported"
                ));
            }
            if value.contains(['\r', '\n']) {
                return Err(format!(
                    "{key}.metadata.{name}: a value may not contain a line break"
                ));
            }
            metadata.push((lower, field(&format!("metadata.{name}"), value)?));
        }
        let expect_values = fields
            .expect_values
            .iter()
            .map(|(path, text)| {
                ValueCheck::parse(text)
                    .map(|check| (path.clone(), check))
                    .map_err(|e| format!("{key}.expect_values.{path}: {e}"))
            })
            .collect::<Result<_, _>>()?;
        let messages = match fields.messages {
            None => 1,
            Some(n @ 1..=100_000) => n,
            Some(n) => return Err(format!("{key}.messages: must be 1 to 100,000, got {n}")),
        };
        let duration = match fields.duration_ms {
            None => None,
            Some(ms @ 1..=MAX_CALL_DURATION_MS) => Some(Duration::from_millis(ms)),
            Some(ms) => {
                return Err(format!(
                    "{key}.duration_ms: must be 1 to {MAX_CALL_DURATION_MS} (an hour), got {ms}"
                ))
            }
        };
        Ok(GrpcMethod {
            messages,
            duration,
            check_messages: fields.check_messages.unwrap_or_default(),
            path: format!("/{service}/{method}"),
            service: service.to_string(),
            method: method.to_string(),
            key,
            request,
            metadata,
            expect_fields: fields.expect_fields.to_vec(),
            expect_values,
            rows,
        })
    }

    /// The request message for `call` as JSON text, appended to `out`.
    pub fn render_request(&self, call: &Call, out: &mut String) {
        self.request.render(call, self.rows.as_deref(), out);
    }

    /// Request message `message` of `call`'s client stream as JSON text, appended to `out`.
    pub fn render_request_message(&self, call: &Call, message: u32, out: &mut String) {
        self.request
            .render_message(call, message, self.rows.as_deref(), out);
    }

    /// Whether the request template numbers a client stream's messages (`{{message}}`).
    pub fn request_uses_message(&self) -> bool {
        self.request.uses_message()
    }

    /// Whether every call sends the same message (then it is encoded once).
    pub fn request_is_constant(&self) -> bool {
        self.request.is_constant()
    }

    /// Renders every metadata value for `call` into `values` (reused).
    pub fn render_metadata(&self, call: &Call, values: &mut Vec<String>) {
        values.resize_with(self.metadata.len(), String::new);
        for ((_, template), value) in self.metadata.iter().zip(values.iter_mut()) {
            value.clear();
            template.render(call, self.rows.as_deref(), value);
        }
    }

    /// The metadata keys, in the order [`GrpcMethod::render_metadata`] fills values.
    pub fn metadata_keys(&self) -> impl Iterator<Item = &str> {
        self.metadata.iter().map(|(k, _)| k.as_str())
    }
}

/// The name of a gRPC status code (grpc/doc/statuscodes.md), for failure details.
pub fn status_code_name(code: u32) -> &'static str {
    match code {
        0 => "OK",
        1 => "CANCELLED",
        2 => "UNKNOWN",
        3 => "INVALID_ARGUMENT",
        4 => "DEADLINE_EXCEEDED",
        5 => "NOT_FOUND",
        6 => "ALREADY_EXISTS",
        7 => "PERMISSION_DENIED",
        8 => "RESOURCE_EXHAUSTED",
        9 => "FAILED_PRECONDITION",
        10 => "ABORTED",
        11 => "OUT_OF_RANGE",
        12 => "UNIMPLEMENTED",
        13 => "INTERNAL",
        14 => "UNAVAILABLE",
        15 => "DATA_LOSS",
        16 => "UNAUTHENTICATED",
        _ => "UNKNOWN_CODE",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::user_service::{Api, Calls, Targets};

    fn calls(text: &str) -> Result<Arc<GrpcCalls>, String> {
        let targets: Targets = toml::from_str(text).map_err(|e| e.to_string())?;
        match targets.calls(Api::Grpc, &|_| None)? {
            Some(Calls::Grpc(c)) => Ok(c),
            _ => Err("no grpc calls".into()),
        }
    }

    #[test]
    fn compiles_method_request_and_descriptor_source() {
        let c = calls(
            r#"
            [grpc]
            address = "http://127.0.0.1:9000"
            method = "shop.v1.Catalog/GetItem"
            proto = ["protos/catalog.proto"]
            request = '{"id": {{id}}}'
            metadata = { "x-tenant" = "w{{worker}}" }
            "#,
        )
        .unwrap();
        let m = &c.methods[0];
        assert_eq!(m.path, "/shop.v1.Catalog/GetItem");
        assert!(!c.endpoint.https);
        assert_eq!(
            c.descriptors,
            Descriptors::Protos {
                files: vec!["protos/catalog.proto".into()],
                import_paths: vec!["protos".into()]
            }
        );
        let call = Call {
            id: 9,
            seq: 0,
            worker: 4,
        };
        let mut json = String::new();
        m.render_request(&call, &mut json);
        assert_eq!(json, r#"{"id": 9}"#);
        let mut values = Vec::new();
        m.render_metadata(&call, &mut values);
        assert_eq!(values, ["w4"]);
        assert_eq!(c.method_index(123), 0, "the short form is one call");
    }

    #[test]
    fn a_mix_compiles_each_call_with_its_own_method_request_and_metadata() {
        let c = calls(
            r#"
            [grpc]
            address = "https://127.0.0.1:9000"
            reflection = true
            metadata = { "x-tenant" = "t1", "x-trace" = "all" }
            [[grpc.calls]]
            name = "get"
            weight = 3
            method = "shop.v1.Catalog/GetItem"
            request = '{"id": {{id}}}'
            expect_fields = ["name"]
            [[grpc.calls]]
            name = "search"
            method = "shop.v1.Search/Find"
            metadata = { "X-Tenant" = "t2" }
            expect_values = { total = ">= 0" }
            "#,
        )
        .unwrap();
        assert_eq!(c.methods.len(), 2);
        let (get, search) = (&c.methods[0], &c.methods[1]);
        assert_eq!(
            (get.key.as_str(), get.path.as_str()),
            ("targets.grpc.calls.get", "/shop.v1.Catalog/GetItem")
        );
        assert_eq!(search.path, "/shop.v1.Search/Find");
        assert_eq!(c.services(), ["shop.v1.Catalog", "shop.v1.Search"]);
        assert_eq!(get.expect_fields, ["name"]);
        assert_eq!(search.expect_values.len(), 1);
        let call = Call {
            id: 5,
            seq: 0,
            worker: 0,
        };
        let mut values = Vec::new();
        get.render_metadata(&call, &mut values);
        assert_eq!(
            get.metadata_keys()
                .zip(values.iter().map(String::as_str))
                .collect::<Vec<_>>(),
            [("x-tenant", "t1"), ("x-trace", "all")]
        );
        // The call's own entry replaces the target's of the same key, whatever its case.
        search.render_metadata(&call, &mut values);
        let mut pairs: Vec<(&str, &str)> = search
            .metadata_keys()
            .zip(values.iter().map(String::as_str))
            .collect();
        pairs.sort();
        assert_eq!(pairs, [("x-tenant", "t2"), ("x-trace", "all")]);
        let mut json = String::new();
        search.render_request(&call, &mut json);
        assert_eq!(json, "{}", "a call's request defaults to the empty message");
        // Weights 3:1 over 4,000 draws (binomial sd ≈ 27), and the draw is the mix's.
        let gets = (0..4000).filter(|&s| c.method_index(s) == 0).count();
        assert!((2900..3100).contains(&gets), "{gets}");
        let seq = 17;
        let picked = c.method_for(&Call {
            id: 1,
            seq,
            worker: 0,
        });
        assert_eq!(picked.path, c.methods[c.method_index(seq)].path);
    }

    #[test]
    fn a_mix_names_the_call_at_fault() {
        let mix = |extra: &str, calls_text: &str| {
            format!("[grpc]\naddress = \"https://h:1\"\nreflection = true\n{extra}\n{calls_text}")
        };
        let two = "[[grpc.calls]]\nname = \"a\"\nmethod = \"p.S/A\"\n[[grpc.calls]]\nname = \"b\"\nmethod = \"p.S/B\"";
        for (text, want) in [
            (
                mix("method = \"p.S/A\"", two),
                "with [[targets.grpc.calls]] give method per call",
            ),
            (
                mix("expect_fields = [\"x\"]", two),
                "give expect_fields per call",
            ),
            (
                mix("", "[[grpc.calls]]\nname = \"a\"\nmethod = \"NoSlash\""),
                "targets.grpc.calls.a.method 'NoSlash'",
            ),
            (
                mix("", "[[grpc.calls]]\nname = \"a\"\nmethod = \"p.S/A\"\nmetadata = { te = \"x\" }"),
                "targets.grpc.calls.a.metadata: 'te'",
            ),
            (
                mix("", "[[grpc.calls]]\nname = \"a\"\nmethod = \"p.S/A\"\nweight = 0"),
                "targets.grpc.calls.a.weight",
            ),
            (
                mix("", "[[grpc.calls]]\nname = \"a\"\nmethod = \"p.S/A\"\n[[grpc.calls]]\nname = \"a\"\nmethod = \"p.S/B\""),
                "'a' is used twice",
            ),
            (mix("", ""), "give the method"),
        ] {
            let e = calls(&text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn bad_grpc_targets_are_refused() {
        for (text, want) in [
            ("[grpc]\naddress = \"https://h:1\"\nmethod = \"NoSlash\"\nreflection = true", "targets.grpc.method"),
            ("[grpc]\naddress = \"https://h:1\"\nmethod = \"a.B/C\"", "description"),
            ("[grpc]\naddress = \"https://h:1/x\"\nmethod = \"a.B/C\"\nreflection = true", "targets.grpc.address"),
            ("[grpc]\naddress = \"https://h:1\"\nmethod = \"a.B/C\"\nreflection = true\nmetadata = { te = \"x\" }", "targets.grpc.metadata"),
        ] {
            let e = calls(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
        assert_eq!(status_code_name(5), "NOT_FOUND");
    }
}
