//! A gRPC target's calls as far as they do not depend on the message types: the method's
//! path, the request and metadata templates, where the descriptors come from and the fields
//! an answer must have. The stack resolves the descriptors and encodes the messages.

use std::path::PathBuf;
use std::sync::Arc;

use crate::call::Call;
use crate::user_service::value_check::ValueCheck;
use crate::user_service::{DataRows, Endpoint, GrpcTarget, IdRange, Sources, Template};

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

/// A gRPC target compiled for sending.
#[derive(Debug)]
pub struct GrpcCalls {
    pub endpoint: Endpoint,
    /// `package.Service`.
    pub service: String,
    pub method: String,
    /// `/package.Service/Method`.
    pub path: String,
    pub descriptors: Descriptors,
    request: Template,
    metadata: Vec<(String, Template)>,
    pub expect_fields: Vec<String>,
    /// `expect_values`: each path with its comparison, in path order.
    pub expect_values: Vec<(String, ValueCheck)>,
    rows: Option<Arc<DataRows>>,
    pub ids: IdRange,
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

impl GrpcCalls {
    pub fn compile(
        target: &GrpcTarget,
        sources: &Sources<'_>,
        rows: Option<Arc<DataRows>>,
        ids: IdRange,
    ) -> Result<GrpcCalls, String> {
        let endpoint = target.endpoint()?;
        let (service, method) = target
            .method
            .trim_start_matches('/')
            .split_once('/')
            .filter(|(s, m)| !s.is_empty() && !m.is_empty() && !m.contains('/'))
            .ok_or_else(|| {
                format!(
                    "targets.grpc.method '{}': expected package.Service/Method",
                    target.method
                )
            })?;
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
        let field = |what: &str, text: &str| {
            Template::parse(text, sources).map_err(|e| format!("targets.grpc.{what}: {e}"))
        };
        let request = field("request", &target.request)?;
        let mut metadata = Vec::new();
        for (name, value) in &target.metadata {
            let lower = name.to_ascii_lowercase();
            let valid = !lower.is_empty()
                && lower
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b));
            if !valid {
                return Err(format!(
                    "targets.grpc.metadata: '{name}' is not a metadata key"
                ));
            }
            if RESERVED.contains(&lower.as_str()) || lower.starts_with("grpc-") {
                return Err(format!(
                    "targets.grpc.metadata: '{name}' is set by the client itself"
                ));
            }
            if lower.ends_with("-bin") {
                return Err(format!(
                    "targets.grpc.metadata: '{name}': binary metadata is not supported"
                ));
            }
            if value.contains(['\r', '\n']) {
                return Err(format!(
                    "targets.grpc.metadata.{name}: a value may not contain a line break"
                ));
            }
            metadata.push((lower, field(&format!("metadata.{name}"), value)?));
        }
        let expect_values = target
            .expect_values
            .iter()
            .map(|(path, text)| {
                ValueCheck::parse(text)
                    .map(|check| (path.clone(), check))
                    .map_err(|e| format!("targets.grpc.expect_values.{path}: {e}"))
            })
            .collect::<Result<_, _>>()?;
        Ok(GrpcCalls {
            path: format!("/{service}/{method}"),
            service: service.to_string(),
            method: method.to_string(),
            endpoint,
            descriptors,
            request,
            metadata,
            expect_fields: target.expect_fields.clone(),
            expect_values,
            rows,
            ids,
        })
    }

    /// The request message for `call` as JSON text, appended to `out`.
    pub fn render_request(&self, call: &Call, out: &mut String) {
        self.request.render(call, self.rows.as_deref(), out);
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

    /// The metadata keys, in the order [`GrpcCalls::render_metadata`] fills values.
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
        assert_eq!(c.path, "/shop.v1.Catalog/GetItem");
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
        c.render_request(&call, &mut json);
        assert_eq!(json, r#"{"id": 9}"#);
        let mut values = Vec::new();
        c.render_metadata(&call, &mut values);
        assert_eq!(values, ["w4"]);
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
