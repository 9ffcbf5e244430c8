//! A target's message descriptors, resolved once before any measurement: `.proto` files
//! compiled at run time (protox, no protoc), or the server's own reflection service
//! (grpc.reflection v1, then v1alpha, which older servers only have) asked over a connection
//! of the stack's own transport ([`Unary`]), so reflection goes over HTTP/2 or HTTP/3 as the
//! calls will.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail};
use async_trait::async_trait;
use bench_core::user_service::grpc::Descriptors;
use bench_core::user_service::GrpcCalls;
use bench_core::{ClientSettings, Failure, FailureClass};
use bytes::Bytes;
use prost::Message;
use prost_reflect::prost_types::FileDescriptorProto;
use prost_reflect::DescriptorPool;

/// One connection of a stack's transport, as reflection uses it: unary exchanges of framed
/// messages on the target's own connection kind.
#[async_trait]
pub trait Unary: Send + Sync {
    /// `body` (one length-prefixed message) POSTed to `path` with gRPC's fields. The outer
    /// error: the exchange failed (a broken connection, a timeout of the transport); the
    /// inner one: the answer's HTTP or gRPC status refused the call
    /// ([`grpc_wire::check_status`]). `Ok(Ok(body))` is a successful answer's whole body.
    async fn call(&self, path: &str, body: Bytes) -> Result<Result<Bytes, Failure>, Failure>;
    /// Closes the connection.
    async fn close(&self);
}

/// The descriptor pool `calls` names: compiled from its `.proto` files, or fetched from the
/// server's reflection service on a connection `open` makes (on a helper thread with its own
/// runtime, so this may be called from inside a runtime; each answer is bounded by the
/// connect and handshake timeouts).
pub fn resolve<C, F, Fut>(
    calls: &GrpcCalls,
    settings: &ClientSettings,
    open: F,
) -> anyhow::Result<DescriptorPool>
where
    C: Unary + 'static,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = anyhow::Result<C>>,
{
    match &calls.descriptors {
        Descriptors::Protos {
            files,
            import_paths,
        } => compile(files, import_paths),
        Descriptors::Reflection => reflect(calls, settings, open),
    }
}

/// Compiles `.proto` files with protox (imports from `import_paths` and the well-known types).
pub fn compile(files: &[PathBuf], import_paths: &[PathBuf]) -> anyhow::Result<DescriptorPool> {
    let mut compiler =
        protox::Compiler::new(import_paths).map_err(|e| anyhow!("targets.grpc.proto: {e}"))?;
    compiler.include_imports(true);
    for file in files {
        compiler
            .open_file(file)
            .map_err(|e| anyhow!("targets.grpc.proto '{}': {}", file.display(), located(&e)))?;
    }
    Ok(compiler.descriptor_pool())
}

/// A protox error with the file, line and column it points at, when it points at one.
fn located(error: &protox::Error) -> String {
    use miette::Diagnostic;
    let at = error
        .labels()
        .and_then(|mut labels| labels.next())
        .and_then(|label| {
            let source = error.source_code()?;
            let span = source.read_span(label.inner(), 0, 0).ok()?;
            Some(format!(
                "{}:{}:{}",
                error.file().unwrap_or("?"),
                span.line() + 1,
                span.column() + 1
            ))
        });
    match at {
        Some(at) => format!("{at}: {error}"),
        None => error.to_string(),
    }
}

/// The reflection service's two versions (same messages, different package).
const REFLECTION_PATHS: [&str; 2] = [
    "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
];

/// Files fetched at most: a service's imports are a handful, a loop would be endless.
const MAX_FILES: usize = 512;

fn reflect<C, F, Fut>(
    calls: &GrpcCalls,
    settings: &ClientSettings,
    open: F,
) -> anyhow::Result<DescriptorPool>
where
    C: Unary + 'static,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = anyhow::Result<C>>,
{
    let authority = calls.endpoint.authority.clone();
    // Every service the calls go to: a mix may call several.
    let services: Vec<String> = calls.services().into_iter().map(String::from).collect();
    // An answer of the reflection service is as quick as a handshake on a sane server.
    let answer_timeout = settings.handshake_timeout.max(settings.connect_timeout);
    std::thread::Builder::new()
        .name("grpc-reflection".into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| anyhow!("reflection: cannot start a runtime: {e}"))?;
            runtime.block_on(async move {
                let conn = open().await?;
                let session = Session {
                    conn: &conn,
                    authority: &authority,
                    answer_timeout,
                };
                let result = session.run(&services).await;
                conn.close().await;
                result
            })
        })
        .map_err(|e| anyhow!("reflection: cannot start its thread: {e}"))?
        .join()
        .map_err(|_| anyhow!("reflection: its thread panicked"))?
}

struct Session<'a, C> {
    conn: &'a C,
    authority: &'a str,
    answer_timeout: Duration,
}

impl<C: Unary> Session<'_, C> {
    async fn run(&self, services: &[String]) -> anyhow::Result<DescriptorPool> {
        let symbol = |service: &str| ReflectionRequest {
            file_containing_symbol: Some(service.to_string()),
            ..Default::default()
        };
        let first = services
            .first()
            .ok_or_else(|| anyhow!("reflection: the target names no service"))?;
        let ask_symbol = symbol(first);
        // The first version the server answers on is used for the rest.
        let mut refused = Vec::new();
        let mut found = None;
        for path in REFLECTION_PATHS {
            match self.ask(path, &ask_symbol).await? {
                Ok(answer) => {
                    found = Some((path, Ok(answer)));
                    break;
                }
                // The version is served but has no such symbol: grpcio says so in its answer,
                // tonic-reflection with the stream's status (NOT_FOUND).
                Err(failure) if answered_by_the_service(&failure) => {
                    found = Some((path, Err(failure)));
                    break;
                }
                Err(failure) => refused.push(format!("{}: {}", version(path), failure.detail)),
            }
        }
        let Some((path, answer)) = found else {
            bail!(
                "reflection: the server at {} offers no reflection service ({}); give the .proto files instead (targets.grpc.proto)",
                self.authority,
                refused.join("; ")
            );
        };
        let mut files = BTreeMap::new();
        let mut first_answer = Some(answer);
        for service in services {
            // The first service's answer is the one that found the version; the others
            // are asked on that version.
            let answer = match first_answer.take() {
                Some(answer) => answer,
                None => self.ask(path, &symbol(service)).await?,
            };
            let added = match answer {
                Ok(answer) => add_files(&mut files, answer),
                Err(failure) => Err(anyhow!("{}", failure.detail)),
            };
            if let Err(e) = added {
                // Most often a misspelt package or service: say which ones there are.
                let offered = match self.offered(path).await {
                    Some(names) if !names.is_empty() => {
                        format!("; the server offers {}", names.join(", "))
                    }
                    _ => String::new(),
                };
                bail!(
                    "reflection ({}): no descriptors for service {service}: {e}{offered}",
                    version(path)
                );
            }
        }
        // Imports the answers left out, asked by file name; the well-known types are built in
        // should a server not give them.
        loop {
            let missing: BTreeSet<(String, String)> = files
                .values()
                .flat_map(|f: &FileDescriptorProto| {
                    f.dependency
                        .iter()
                        .filter(|d| !files.contains_key(*d))
                        .map(|d| (d.clone(), f.name().to_string()))
                })
                .collect();
            let Some((name, importer)) = missing.into_iter().next() else {
                break;
            };
            if files.len() >= MAX_FILES {
                bail!(
                    "reflection: more than {MAX_FILES} files for {}",
                    services.join(", ")
                );
            }
            let ask_file = ReflectionRequest {
                file_by_filename: Some(name.clone()),
                ..Default::default()
            };
            let answer = self.ask(path, &ask_file).await?.map_err(|f| {
                anyhow!("reflection: asking for {name} (imported by {importer}): {f}")
            });
            let added = answer.and_then(|a| add_files(&mut files, a));
            if !files.contains_key(&name) {
                match DescriptorPool::global().get_file_by_name(&name) {
                    Some(known) => {
                        files.insert(name.clone(), known.file_descriptor_proto().clone());
                    }
                    None => {
                        let why = added.err().map_or_else(
                            || "the answer did not contain it".to_string(),
                            |e| e.to_string(),
                        );
                        bail!(
                            "reflection: the server did not give {name} (imported by {importer}): {why}"
                        );
                    }
                }
            }
        }
        let mut pool = DescriptorPool::new();
        pool.add_file_descriptor_protos(files.into_values())
            .map_err(|e| anyhow!("reflection: the server's descriptors do not build: {e}"))?;
        Ok(pool)
    }

    /// The services the server lists (reflection's `list_services`), without the reflection
    /// service itself; `None` when it does not answer that.
    async fn offered(&self, path: &str) -> Option<Vec<String>> {
        let ask = ReflectionRequest {
            list_services: Some(String::new()),
            ..Default::default()
        };
        let answer = self.ask(path, &ask).await.ok()?.ok()?;
        Some(
            answer
                .list_services_response?
                .service
                .into_iter()
                .map(|s| s.name)
                .filter(|n| !n.starts_with("grpc.reflection."))
                .collect(),
        )
    }

    /// One request and its one answer on a stream of the bidirectional method (the request
    /// ends the stream, so the server ends its side after answering). A gRPC or HTTP error
    /// status is the inner error; a broken connection or a timeout is the outer one.
    async fn ask(
        &self,
        path: &str,
        request: &ReflectionRequest,
    ) -> anyhow::Result<Result<ReflectionResponse, Failure>> {
        let exchange = self.conn.call(path, grpc_wire::frame(request));
        let answer = tokio::time::timeout(self.answer_timeout, exchange)
            .await
            .map_err(|_| {
                anyhow!(
                    "reflection ({}): no answer from {} within {:?}",
                    version(path),
                    self.authority,
                    self.answer_timeout
                )
            })?;
        let body = match answer {
            Ok(Ok(body)) => body,
            Ok(Err(refused)) => return Ok(Err(refused)),
            Err(f) if !f.breaks_connection() => return Ok(Err(f)),
            Err(f) => bail!("reflection ({}): {f}", version(path)),
        };
        let message =
            first_message(&body).map_err(|e| anyhow!("reflection ({}): {e}", version(path)))?;
        let response = ReflectionResponse::decode(message)
            .map_err(|e| anyhow!("reflection ({}): undecodable answer: {e}", version(path)))?;
        Ok(Ok(response))
    }
}

/// Whether a refused call was refused by a reflection service (a gRPC status other than
/// UNIMPLEMENTED, with which a server answers a service it does not have), not by its absence.
fn answered_by_the_service(failure: &Failure) -> bool {
    failure.class == FailureClass::BadStatus
        && failure
            .code
            .as_deref()
            .is_some_and(|code| code != "UNIMPLEMENTED" && !code.starts_with("HTTP "))
}

/// `v1` or `v1alpha`, for messages.
fn version(path: &str) -> &str {
    path.trim_start_matches("/grpc.reflection.")
        .split('.')
        .next()
        .unwrap_or(path)
}

/// The files of a reflection answer, by name; an error answer is an error.
fn add_files(
    files: &mut BTreeMap<String, FileDescriptorProto>,
    answer: ReflectionResponse,
) -> anyhow::Result<()> {
    if let Some(error) = answer.error_response {
        let code = u32::try_from(error.error_code).unwrap_or(2);
        bail!(
            "{} {}",
            bench_core::user_service::grpc::status_code_name(code),
            error.error_message
        );
    }
    let Some(response) = answer.file_descriptor_response else {
        bail!("the answer has no file descriptors");
    };
    for bytes in response.file_descriptor_proto {
        let file = FileDescriptorProto::decode(&bytes[..])
            .map_err(|e| anyhow!("undecodable FileDescriptorProto: {e}"))?;
        files.entry(file.name().to_string()).or_insert(file);
    }
    Ok(())
}

/// The first length-prefixed message of a (streaming) answer's body.
fn first_message(body: &Bytes) -> anyhow::Result<Bytes> {
    if body.len() < 5 {
        bail!("the answer has no message");
    }
    if body[0] != 0 {
        bail!("the answer is compressed, none was negotiated");
    }
    let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
    if body.len() < 5 + len {
        bail!("a message of {len} bytes in {} bytes", body.len() - 5);
    }
    Ok(body.slice(5..5 + len))
}

/// `grpc.reflection.v1.ServerReflectionRequest` (v1alpha is the same): the fields we send;
/// the `oneof` members are optional fields, which encode the same way.
#[derive(Clone, PartialEq, prost::Message)]
struct ReflectionRequest {
    #[prost(string, tag = "1")]
    host: String,
    #[prost(string, optional, tag = "3")]
    file_by_filename: Option<String>,
    #[prost(string, optional, tag = "4")]
    file_containing_symbol: Option<String>,
    #[prost(string, optional, tag = "7")]
    list_services: Option<String>,
}

/// `ServerReflectionResponse`: the two answers we read (others are skipped).
#[derive(Clone, PartialEq, prost::Message)]
struct ReflectionResponse {
    #[prost(message, optional, tag = "4")]
    file_descriptor_response: Option<FileDescriptorResponse>,
    #[prost(message, optional, tag = "6")]
    list_services_response: Option<ListServiceResponse>,
    #[prost(message, optional, tag = "7")]
    error_response: Option<ErrorResponse>,
}

/// `ListServiceResponse`: the services the server has.
#[derive(Clone, PartialEq, prost::Message)]
struct ListServiceResponse {
    #[prost(message, repeated, tag = "1")]
    service: Vec<ServiceResponse>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ServiceResponse {
    #[prost(string, tag = "1")]
    name: String,
}

#[derive(Clone, PartialEq, prost::Message)]
struct FileDescriptorResponse {
    /// Serialized `FileDescriptorProto`s.
    #[prost(bytes = "vec", repeated, tag = "1")]
    file_descriptor_proto: Vec<Vec<u8>>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ErrorResponse {
    #[prost(int32, tag = "1")]
    error_code: i32,
    #[prost(string, tag = "2")]
    error_message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reflection_answers_decode_and_build_a_pool() {
        let file = FileDescriptorProto {
            name: Some("a.proto".into()),
            package: Some("a".into()),
            dependency: vec!["google/protobuf/timestamp.proto".into()],
            ..Default::default()
        };
        let answer = ReflectionResponse {
            file_descriptor_response: Some(FileDescriptorResponse {
                file_descriptor_proto: vec![file.encode_to_vec()],
            }),
            ..Default::default()
        };
        let framed = grpc_wire::frame(&answer);
        let decoded = ReflectionResponse::decode(first_message(&framed).unwrap()).unwrap();
        let mut files = BTreeMap::new();
        add_files(&mut files, decoded).unwrap();
        assert_eq!(files["a.proto"], file);
        let refused = ReflectionResponse {
            file_descriptor_response: None,
            error_response: Some(ErrorResponse {
                error_code: 5,
                error_message: "Symbol not found: x.Y".into(),
            }),
            ..Default::default()
        };
        let e = add_files(&mut files, refused).unwrap_err().to_string();
        assert_eq!(e, "NOT_FOUND Symbol not found: x.Y");
        assert_eq!(version(REFLECTION_PATHS[1]), "v1alpha");
        let status = |code: &str| {
            Failure::new(FailureClass::BadStatus, "refused").with_code(code.to_string())
        };
        assert!(answered_by_the_service(&status("NOT_FOUND")));
        assert!(!answered_by_the_service(&status("UNIMPLEMENTED")));
        assert!(!answered_by_the_service(&status("HTTP 404")));
        assert!(first_message(&Bytes::from_static(&[0, 0, 0, 0, 9, 1])).is_err());
    }

    #[test]
    fn request_encodes_as_the_reflection_proto_says() {
        let request = ReflectionRequest {
            file_containing_symbol: Some("a.B".into()),
            ..Default::default()
        };
        // Field 4, length-delimited, "a.B"; the empty host is left out.
        assert_eq!(request.encode_to_vec(), [0x22, 3, b'a', b'.', b'B']);
    }

    #[test]
    fn proto_errors_name_the_file_line_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let bad = "syntax = \"proto3\";\nmessage A { int32 x = ; }\n";
        std::fs::write(dir.path().join("bad.proto"), bad).unwrap();
        let import = "syntax = \"proto3\";\nimport \"missing.proto\";\n";
        std::fs::write(dir.path().join("imp.proto"), import).unwrap();
        let includes = [dir.path().to_path_buf()];
        let error = |file: &str| compile(&[file.into()], &includes).unwrap_err().to_string();
        assert_eq!(
            error("bad.proto"),
            "targets.grpc.proto 'bad.proto': bad.proto:2:23: expected an integer, but found ';'"
        );
        assert_eq!(
            error("imp.proto"),
            "targets.grpc.proto 'imp.proto': imp.proto:2:1: import 'missing.proto' not found"
        );
        assert!(error("none.proto").contains("not in any include path"));
    }
}
