//! A target's methods prepared for sending, whatever the transport: each request message
//! rendered from its call's JSON template and encoded with the method's descriptors, and
//! each answer decoded and checked for the expected fields, so that every gRPC stack
//! validates a user's service alike. Everything that can be wrong with the target is found
//! in [`Methods::prepare`], before measuring.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, bail};
use bench_core::user_service::grpc::GrpcMethod;
use bench_core::user_service::value_check::{FieldValue, Literal, ValueCheck};
use bench_core::user_service::{CheckMessages, GrpcCalls};
use bench_core::{Call, Failure, FailureClass};
use bytes::{Bytes, BytesMut};
use prost_reflect::{
    DescriptorPool, DynamicMessage, FieldDescriptor, Kind, MessageDescriptor, Value,
};

/// Every method of a target (one for the short form, one per call of a mix), prepared once.
pub struct Methods {
    calls: Arc<GrpcCalls>,
    /// In the order of [`GrpcCalls::methods`].
    methods: Vec<Method>,
}

impl Methods {
    /// Each method `calls` names, found in `pool`, with its answer checks and its request
    /// template checked; an error names the setting at fault (`targets.grpc.…`, or
    /// `targets.grpc.calls.NAME.…` in a mix).
    pub fn prepare(calls: Arc<GrpcCalls>, pool: &DescriptorPool) -> anyhow::Result<Methods> {
        let methods = (0..calls.methods.len())
            .map(|index| Method::prepare(calls.clone(), index, pool))
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Methods { calls, methods })
    }

    /// The target's calls.
    pub fn calls(&self) -> &GrpcCalls {
        &self.calls
    }

    /// The method request `call` makes (the mix's draw for its `seq`).
    pub fn for_call(&self, call: &Call) -> &Method {
        &self.methods[self.calls.method_index(call.seq)]
    }

    /// What the user is told before the run, one line each, for every method.
    pub fn notes(&self) -> Vec<String> {
        self.methods
            .iter()
            .flat_map(|m| m.notes.iter().cloned())
            .collect()
    }
}

/// One method, its message types and the checks on its answers, prepared once.
pub struct Method {
    calls: Arc<GrpcCalls>,
    /// Which of the target's methods this is.
    index: usize,
    input: MessageDescriptor,
    output: MessageDescriptor,
    expect: Vec<Expectation>,
    /// `expect_values`, resolved.
    values: Vec<ValueExpectation>,
    /// What the user is told before the run (an expectation that cannot be checked as
    /// written).
    notes: Vec<String>,
    /// The framed request when every call sends the same message.
    constant: Option<Bytes>,
    /// The method's request and answer are streams ([`Method::encode`] sends the
    /// `messages` of a client stream; [`Method::server_streaming`] answers are read as they
    /// come, every message checked).
    client_streaming: bool,
    server_streaming: bool,
    /// Buffers of requests in flight, returned after each (as many as ever ran at once).
    scratch: Mutex<Vec<Scratch>>,
}

/// A server-streaming or bidi answer being read: its messages split, checked and timed as
/// they arrive ([`Method::answer_stream`]).
pub struct AnswerStream<'a> {
    method: &'a Method,
    reader: grpc_wire::MessageReader,
    pub times: grpc_wire::MessageTimes,
    /// With `check_messages = "last"`: the latest message, checked when the answer ends.
    last: Option<Bytes>,
}

impl AnswerStream<'_> {
    /// The answer's next bytes, which arrived at `at`.
    pub fn data(
        &mut self,
        chunk: &[u8],
        at: std::time::Instant,
        on_gap: &mut (dyn FnMut(std::time::Duration) + Send),
    ) -> Result<(), Failure> {
        self.reader.feed(chunk);
        while let Some(message) = self.reader.next_message()? {
            let len = message.len();
            match self.method.spec().check_messages {
                CheckMessages::Every => self.method.check(message)?,
                CheckMessages::Last => self.last = Some(message),
            }
            self.times.message(len, at, on_gap);
        }
        Ok(())
    }

    /// The client ended the call at its `duration_ms`, `total` after it began (its stream
    /// is cancelled): the messages whole by then count, a message still arriving does not.
    /// Its `ttfb` is the first message's arrival, or `total` when none came.
    pub fn cut(&mut self, total: std::time::Duration) -> Result<bench_core::Reply, Failure> {
        self.check_last()?;
        let ttfb = match self.times.messages {
            0 => total,
            _ => self.times.first_message(),
        };
        Ok(self.reply_with(ttfb, total))
    }

    /// With `check_messages = "last"`: the last message held to the answer checks (an
    /// answer without one fails them, if there are any).
    fn check_last(&mut self) -> Result<(), Failure> {
        if self.method.spec().check_messages != CheckMessages::Last {
            return Ok(());
        }
        match self.last.take() {
            Some(message) => self.method.check(message),
            None if self.method.has_checks() => Err(Failure::new(
                FailureClass::MissingData,
                "the answer has no message to check (check_messages = \"last\")",
            )
            .with_code("no_message")),
            None => Ok(()),
        }
    }

    fn reply_with(
        &self,
        ttfb: std::time::Duration,
        total: std::time::Duration,
    ) -> bench_core::Reply {
        bench_core::Reply {
            ttfb,
            total,
            body_bytes: self.times.body_bytes,
            messages: self.times.messages,
            reopened: None,
            streamed: true,
        }
    }

    /// The answer ended (its status checked by the caller): an error if it ended inside a
    /// message; else the reply, its `ttfb` the first message's arrival (the head's,
    /// `head_ttfb`, for an answer without messages).
    pub fn reply(
        &mut self,
        head_ttfb: std::time::Duration,
        total: std::time::Duration,
    ) -> Result<bench_core::Reply, Failure> {
        self.reader.finish()?;
        self.check_last()?;
        let ttfb = match self.times.messages {
            0 => head_ttfb,
            _ => self.times.first_message(),
        };
        Ok(self.reply_with(ttfb, total))
    }
}

/// A request's reused buffers: its JSON text, metadata values and encoded frame.
#[derive(Default)]
pub struct Scratch {
    json: String,
    /// The metadata values of the call ([`GrpcCalls::render_metadata`]).
    pub metadata: Vec<String>,
    frame: BytesMut,
}

/// A dotted field path the answer must have, resolved to its fields.
struct Expectation {
    path: String,
    fields: Vec<FieldDescriptor>,
    /// Whether the wire shows the last field's presence: message fields, `optional` and
    /// proto2 fields and oneof members have it (and a repeated field or map can be checked
    /// for being empty); a proto3 scalar without `optional` is absent exactly when it holds
    /// its default, so only the messages around it are checked.
    observable: bool,
}

/// An `expect_values` path and the comparison its value must pass.
struct ValueExpectation {
    expectation: Expectation,
    check: ValueCheck,
}

impl Method {
    /// Method `index` of `calls`, found in `pool`, its answer checks and its request
    /// template, each checked; an error names the setting at fault.
    fn prepare(
        calls: Arc<GrpcCalls>,
        index: usize,
        pool: &DescriptorPool,
    ) -> anyhow::Result<Method> {
        let spec = &calls.methods[index];
        let key = spec.key.as_str();
        let service = pool.get_service_by_name(&spec.service).ok_or_else(|| {
            anyhow!(
                "{key}.method: the descriptors have no service {} (they have: {})",
                spec.service,
                names(pool.services().map(|s| s.full_name().to_string()))
            )
        })?;
        let method = service
            .methods()
            .find(|m| m.name() == spec.method)
            .ok_or_else(|| {
                anyhow!(
                    "{key}.method: service {} has no method {} (it has: {})",
                    spec.service,
                    spec.method,
                    names(service.methods().map(|m| m.name().to_string()))
                )
            })?;
        let (client_streaming, server_streaming) =
            (method.is_client_streaming(), method.is_server_streaming());
        if spec.messages > 1 && !client_streaming {
            bail!(
                "{key}.messages: {} takes one request message (it is not client-streaming or bidi); remove messages",
                spec.path
            );
        }
        if spec.request_uses_message() && !client_streaming {
            bail!(
                "{key}.request: {{{{message}}}} numbers the messages of a client stream; {} takes one request message",
                spec.path
            );
        }
        if spec.duration.is_some() && !server_streaming {
            bail!(
                "{key}.duration_ms: ends a streamed answer early; {}'s answer is one message (a client stream's length is messages = N)",
                spec.path
            );
        }
        if spec.check_messages == CheckMessages::Last && !server_streaming {
            bail!(
                "{key}.check_messages: chooses among a streamed answer's messages; {}'s answer is one message",
                spec.path
            );
        }
        let input = method.input();
        let output = method.output();
        let expect: Vec<Expectation> = spec
            .expect_fields
            .iter()
            .map(|path| Expectation::resolve(&output, path, key, "expect_fields"))
            .collect::<anyhow::Result<_>>()?;
        let values: Vec<ValueExpectation> = spec
            .expect_values
            .iter()
            .map(|(path, check)| ValueExpectation::resolve(&output, path, key, check))
            .collect::<anyhow::Result<_>>()?;
        // Warn and check what can be checked: refusing would stop configurations that ran
        // before, and counting every legitimate 0 as missing_data is the false failure this
        // replaces.
        let notes = expect
            .iter()
            .filter(|e| !e.observable)
            .filter(|e| !spec.expect_values.iter().any(|(p, _)| *p == e.path))
            .map(|e| e.presence_note(key))
            .collect();
        let constant_request = spec.request_is_constant();
        let mut method = Method {
            calls,
            index,
            input,
            output,
            expect,
            values,
            notes,
            constant: None,
            client_streaming,
            server_streaming,
            scratch: Mutex::new(Vec::new()),
        };
        // The template must make a valid message before anything is measured.
        let first = Call {
            id: method.calls.ids.from,
            seq: 0,
            worker: 0,
        };
        let mut json = String::new();
        method.spec().render_request(&first, &mut json);
        let message = json_message(&method.input, &json).map_err(|e| {
            anyhow!(
                "{}.request: not a {} in protobuf's JSON mapping (rendered for id {}): {e}",
                method.spec().key,
                method.input.full_name(),
                first.id
            )
        })?;
        if constant_request {
            let framed = grpc_wire::frame(&message);
            method.constant = Some(method.repeated(framed));
        }
        Ok(method)
    }

    /// The target's calls.
    pub fn calls(&self) -> &GrpcCalls {
        &self.calls
    }

    /// This method's calls: its path, templates and expectations.
    pub fn spec(&self) -> &GrpcMethod {
        &self.calls.methods[self.index]
    }

    /// Which of the target's methods this is ([`GrpcCalls::methods`]).
    pub fn index(&self) -> usize {
        self.index
    }

    /// What the user should know before the run, one line each: the `expect_fields` paths
    /// whose presence the wire does not show, with the value check to write instead.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// The framed request message for `call`.
    pub fn encode(&self, call: &Call, scratch: &mut Scratch) -> Result<Bytes, Failure> {
        if let Some(constant) = &self.constant {
            return Ok(constant.clone());
        }
        if self.client_streaming && self.spec().request_uses_message() {
            // Each message of the stream rendered with its number.
            let mut body = BytesMut::new();
            for k in 0..self.spec().messages {
                let message = self.render(call, k, scratch)?;
                body.extend_from_slice(&grpc_wire::frame_into(&message, &mut scratch.frame));
            }
            return Ok(body.freeze());
        }
        let message = self.render(call, 0, scratch)?;
        let framed = grpc_wire::frame_into(&message, &mut scratch.frame);
        Ok(self.repeated(framed))
    }

    /// Request message `k` of `call`, rendered from the template and encoded.
    fn render(
        &self,
        call: &Call,
        k: u32,
        scratch: &mut Scratch,
    ) -> Result<DynamicMessage, Failure> {
        scratch.json.clear();
        self.spec()
            .render_request_message(call, k, &mut scratch.json);
        json_message(&self.input, &scratch.json).map_err(|e| {
            Failure::new(
                FailureClass::Other,
                format!(
                    "{}.request rendered for id {} is not a {}: {e}",
                    self.spec().key,
                    call.id,
                    self.input.full_name()
                ),
            )
            .with_code("request_encoding")
        })
    }

    /// A client stream's body: the framed message `messages` times (as is for one); a
    /// template with `{{message}}` is rendered per message instead ([`Method::encode`]).
    fn repeated(&self, framed: Bytes) -> Bytes {
        let n = self.spec().messages as usize;
        if !self.client_streaming || n <= 1 {
            return framed;
        }
        let mut body = BytesMut::with_capacity(framed.len() * n);
        for _ in 0..n {
            body.extend_from_slice(&framed);
        }
        body.freeze()
    }

    /// Whether the request is a stream of messages (client-streaming and bidi methods).
    pub fn client_streaming(&self) -> bool {
        self.client_streaming
    }

    /// Whether the answer is a stream of messages (server-streaming and bidi methods).
    pub fn server_streaming(&self) -> bool {
        self.server_streaming
    }

    /// Request messages each call streams (client-streaming and bidi: `messages`; 0 for a
    /// method whose request is one message, as [`bench_core::Reply::messages`] counts).
    pub fn request_messages(&self) -> u32 {
        if self.client_streaming {
            self.spec().messages
        } else {
            0
        }
    }

    /// The answer's message, with every expected field present.
    pub fn check(&self, message: Bytes) -> Result<(), Failure> {
        let decoded = DynamicMessage::decode(self.output.clone(), message).map_err(|e| {
            Failure::new(
                FailureClass::BadBody,
                format!("invalid protobuf {}: {e}", self.output.full_name()),
            )
        })?;
        if let Some(missing) = self.expect.iter().find(|e| !e.present_in(&decoded)) {
            return Err(Failure::new(
                FailureClass::MissingData,
                format!("field {} is missing or empty in the answer", missing.path),
            )
            .with_code(missing.path.clone()));
        }
        for value in &self.values {
            value.check(&decoded)?;
        }
        Ok(())
    }

    /// A streaming answer of this method, read as it arrives: every message checked
    /// ([`Method::check`]) and timed, each at most `max_message_bytes`.
    pub fn answer_stream(
        &self,
        max_message_bytes: u64,
        started: std::time::Instant,
    ) -> AnswerStream<'_> {
        AnswerStream {
            method: self,
            reader: grpc_wire::MessageReader::new(max_message_bytes),
            times: grpc_wire::MessageTimes::new(started),
            last: None,
        }
    }

    /// Whether answers are held to anything beyond being this method's message.
    fn has_checks(&self) -> bool {
        !self.expect.is_empty() || !self.values.is_empty()
    }

    /// Reads a streamed answer (`read`) until the call's `duration_ms` since `started` is
    /// over: `None` when that came first. `read` is then dropped, which cancels its stream
    /// on both stacks; without `duration_ms` the answer is read to its end.
    pub async fn read_for_duration<T>(
        &self,
        started: std::time::Instant,
        read: impl std::future::Future<Output = T>,
    ) -> Option<T> {
        match self.spec().duration {
            None => Some(read.await),
            Some(d) => tokio::time::timeout_at((started + d).into(), read)
                .await
                .ok(),
        }
    }

    /// Buffers for one request (reused from an earlier one when there is one).
    pub fn take_scratch(&self) -> Scratch {
        self.scratch
            .lock()
            .expect("scratch lock")
            .pop()
            .unwrap_or_default()
    }

    /// Returns a request's buffers for the next one.
    pub fn put_scratch(&self, scratch: Scratch) {
        self.scratch.lock().expect("scratch lock").push(scratch);
    }
}

impl Expectation {
    /// `owner.name` → the `owner` field of the output, then `name` of its type; each part
    /// by proto or JSON name, and every part but the last a singular message field.
    fn resolve(
        output: &MessageDescriptor,
        path: &str,
        key: &str,
        setting: &str,
    ) -> anyhow::Result<Expectation> {
        let bad = |why: String| anyhow!("{key}.{setting}: '{path}': {why}");
        let mut message = output.clone();
        let mut fields = Vec::new();
        let parts: Vec<&str> = path.split('.').collect();
        for (i, name) in parts.iter().enumerate() {
            if name.is_empty() {
                return Err(bad("an empty field name".into()));
            }
            let field = message
                .get_field_by_name(name)
                .or_else(|| message.get_field_by_json_name(name))
                .ok_or_else(|| {
                    bad(format!(
                        "{} has no field '{name}' (it has: {})",
                        message.full_name(),
                        names(message.fields().map(|f| f.name().to_string()))
                    ))
                })?;
            if i + 1 < parts.len() {
                match field.kind() {
                    Kind::Message(inner) if !field.is_list() && !field.is_map() => {
                        message = inner;
                    }
                    _ => {
                        return Err(bad(format!(
                            "'{name}' is not a single message field, so the path cannot go into it"
                        )))
                    }
                }
            }
            fields.push(field);
        }
        let last = fields.last().expect("a path has a field");
        let observable = last.supports_presence() || last.is_list() || last.is_map();
        Ok(Expectation {
            path: path.to_string(),
            fields,
            observable,
        })
    }

    /// The note for a path whose presence the wire does not show, with the value check to
    /// write instead.
    fn presence_note(&self, key: &str) -> String {
        let last = self.fields.last().expect("a path has a field");
        let (default, suggestion) = match last.kind() {
            Kind::String => ("\"\"", "!= ''"),
            Kind::Bool => ("false", "== true"),
            Kind::Bytes => ("empty", "!= ''"),
            Kind::Enum(_) => ("its first value (0)", ">= 0"),
            _ => ("0", ">= 0"),
        };
        format!(
            "{key}.expect_fields: '{path}' is a proto3 {kind} without presence: the wire leaves it out when it is {default}, so only the message around it is checked; to check its value, write expect_values = {{ \"{path}\" = \"{suggestion}\" }}",
            path = self.path,
            kind = kind_name(last),
        )
    }

    /// The message holding the last field, if every message on the path is present.
    fn parent_in<'m>(&self, message: &'m DynamicMessage) -> Option<&'m DynamicMessage> {
        let (_, parents) = self.fields.split_last()?;
        let mut message = message;
        for field in parents {
            if !message.has_field(field) {
                return None;
            }
            match message.get_field(field) {
                Cow::Borrowed(Value::Message(inner)) => message = inner,
                _ => return None,
            }
        }
        Some(message)
    }

    /// Present as protobuf defines it: a field with presence (messages, `optional`, oneof
    /// members) is set, a repeated field or map is not empty; for a field without presence
    /// only the messages around it must be there (a default value is a valid answer).
    fn present_in(&self, message: &DynamicMessage) -> bool {
        let Some(parent) = self.parent_in(message) else {
            return false;
        };
        !self.observable || parent.has_field(self.fields.last().expect("a path has a field"))
    }
}

/// A field's type as a `.proto` file writes it.
fn kind_name(field: &FieldDescriptor) -> String {
    match field.kind() {
        Kind::Message(m) => m.full_name().to_string(),
        Kind::Enum(e) => e.full_name().to_string(),
        other => format!("{other:?}").to_ascii_lowercase(),
    }
}

impl ValueExpectation {
    /// The path resolved to a singular scalar or enum whose values the comparison can take.
    fn resolve(
        output: &MessageDescriptor,
        path: &str,
        key: &str,
        check: &ValueCheck,
    ) -> anyhow::Result<ValueExpectation> {
        let expectation = Expectation::resolve(output, path, key, "expect_values")?;
        let last = expectation.fields.last().expect("a path has a field");
        let bad = |why: String| anyhow!("{key}.expect_values.{path}: {why}");
        if last.is_list() || last.is_map() {
            return Err(bad(
                "a repeated field or map has no single value to compare".into(),
            ));
        }
        let sample = match last.kind() {
            Kind::Message(_) | Kind::Bytes => {
                return Err(bad(format!(
                    "a {} field has no value to compare; give a number, bool, string or enum field",
                    kind_name(last)
                )))
            }
            Kind::Bool => FieldValue::Bool(false),
            Kind::String => FieldValue::Text(""),
            Kind::Float | Kind::Double => FieldValue::Float(0.0),
            Kind::Enum(_) if matches!(check.value, Literal::Text(_)) => FieldValue::Text(""),
            _ => FieldValue::Integer(0),
        };
        if check.holds(sample).is_none() {
            return Err(bad(format!(
                "'{}' does not compare with a {} field",
                check.text,
                kind_name(last)
            )));
        }
        Ok(ValueExpectation {
            expectation,
            check: check.clone(),
        })
    }

    /// The field's value (its default when the wire left it out) passes the comparison.
    fn check(&self, message: &DynamicMessage) -> Result<(), Failure> {
        let path = &self.expectation.path;
        let missing = |detail: String| {
            Failure::new(FailureClass::MissingData, detail).with_code(path.clone())
        };
        let parent = self.expectation.parent_in(message).ok_or_else(|| {
            missing(format!(
                "a message on the path {path} is missing, so its value cannot be checked"
            ))
        })?;
        let last = self.expectation.fields.last().expect("a path has a field");
        let value = parent.get_field(last);
        let enum_name: String = match (&*value, last.kind()) {
            (Value::EnumNumber(n), Kind::Enum(e)) => e
                .get_value(*n)
                .map_or_else(String::new, |v| v.name().to_string()),
            _ => String::new(),
        };
        let field = match (&*value, last.kind()) {
            (Value::EnumNumber(_), Kind::Enum(_))
                if matches!(self.check.value, Literal::Text(_)) =>
            {
                FieldValue::Text(&enum_name)
            }
            (Value::EnumNumber(n), _) => FieldValue::Integer(i128::from(*n)),
            (Value::I32(v), _) => FieldValue::Integer(i128::from(*v)),
            (Value::I64(v), _) => FieldValue::Integer(i128::from(*v)),
            (Value::U32(v), _) => FieldValue::Integer(i128::from(*v)),
            (Value::U64(v), _) => FieldValue::Integer(i128::from(*v)),
            (Value::F32(v), _) => FieldValue::Float(f64::from(*v)),
            (Value::F64(v), _) => FieldValue::Float(*v),
            (Value::Bool(v), _) => FieldValue::Bool(*v),
            (Value::String(v), _) => FieldValue::Text(v),
            _ => return Err(missing(format!("field {path} has no comparable value"))),
        };
        match self.check.holds(field) {
            Some(true) => Ok(()),
            _ => Err(missing(format!(
                "field {path} is {}, expected {}",
                shown(field),
                self.check.text
            ))),
        }
    }
}

/// A value as a failure message shows it.
fn shown(value: FieldValue<'_>) -> String {
    match value {
        FieldValue::Integer(v) => v.to_string(),
        FieldValue::Float(v) => v.to_string(),
        FieldValue::Bool(v) => v.to_string(),
        FieldValue::Text(v) => format!("{v:?}"),
    }
}

/// A message of type `desc` from JSON text (protobuf's JSON mapping; unknown fields refused).
fn json_message(desc: &MessageDescriptor, json: &str) -> Result<DynamicMessage, String> {
    let mut de = serde_json::Deserializer::from_str(json);
    let message = DynamicMessage::deserialize(desc.clone(), &mut de).map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    Ok(message)
}

/// Names for an error message: sorted, comma-separated, "none" when there are none.
fn names(items: impl Iterator<Item = String>) -> String {
    let mut items: Vec<String> = items.collect();
    items.sort();
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bench_core::user_service::{Api, Calls, Targets};
    use prost::Message;

    const PROTO: &str = r#"
        syntax = "proto3";
        package shop.v1;
        message GetItemRequest { uint64 id = 1; }
        message Owner { string name = 1; }
        message Item {
          uint64 id = 1;
          string name = 2;
          Owner owner = 3;
          repeated string tags = 4;
          optional int32 stock = 5;
        }
        service Catalog {
          rpc GetItem(GetItemRequest) returns (Item);
          rpc Watch(GetItemRequest) returns (stream Item);
        }
    "#;

    fn pool() -> (tempfile::TempDir, DescriptorPool) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("shop.proto"), PROTO).unwrap();
        let pool = crate::descriptors::compile(&["shop.proto".into()], &[dir.path().to_path_buf()])
            .unwrap();
        (dir, pool)
    }

    fn calls(extra: &str) -> Arc<GrpcCalls> {
        let text = format!(
            "[grpc]\naddress = \"http://127.0.0.1:1\"\nmethod = \"shop.v1.Catalog/GetItem\"\nproto = [\"shop.proto\"]\n{extra}"
        );
        let targets: Targets = toml::from_str(&text).unwrap();
        match targets.calls(Api::Grpc, &|_| None).unwrap() {
            Some(Calls::Grpc(c)) => c,
            _ => unreachable!(),
        }
    }

    fn prepare(extra: &str) -> anyhow::Result<Method> {
        Methods::prepare(calls(extra), &pool().1).map(|mut m| m.methods.remove(0))
    }

    fn mix(calls_text: &str) -> Arc<GrpcCalls> {
        let text = format!(
            "[grpc]\naddress = \"http://127.0.0.1:1\"\nproto = [\"shop.proto\"]\n{calls_text}"
        );
        let targets: Targets = toml::from_str(&text).unwrap();
        match targets.calls(Api::Grpc, &|_| None).unwrap() {
            Some(Calls::Grpc(c)) => c,
            _ => unreachable!(),
        }
    }

    #[test]
    fn a_mix_prepares_each_call_and_each_request_goes_to_its_draw() {
        let methods = Methods::prepare(
            mix(r#"
                [[grpc.calls]]
                name = "by-id"
                weight = 2
                method = "shop.v1.Catalog/GetItem"
                request = '{"id": {{id}}}'
                expect_fields = ["owner"]
                [[grpc.calls]]
                name = "first"
                method = "shop.v1.Catalog/GetItem"
                request = '{"id": "1"}'
                expect_fields = ["name"]
            "#),
            &pool().1,
        )
        .unwrap();
        assert_eq!(methods.methods.len(), 2);
        // Each call's own expectations: only "first" has a field without presence.
        let notes = methods.notes();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].starts_with("targets.grpc.calls.first.expect_fields: 'name'"));
        // One line as written, no run of blanks from a wrapped literal.
        assert!(
            notes[0].contains("the wire leaves it out when it is \"\", so")
                && !notes[0].contains("  "),
            "{}",
            notes[0]
        );
        let mut scratch = Scratch::default();
        let mut seen = [false, false];
        for seq in 0..64 {
            let call = Call {
                id: 300,
                seq,
                worker: 0,
            };
            let method = methods.for_call(&call);
            assert_eq!(method.index(), methods.calls().method_index(seq));
            seen[method.index()] = true;
            let framed = method.encode(&call, &mut scratch).unwrap();
            let want: &[u8] = if method.index() == 0 {
                &[0, 0, 0, 0, 3, 0x08, 0xac, 0x02]
            } else {
                &[0, 0, 0, 0, 2, 0x08, 1]
            };
            assert_eq!(&framed[..], want, "seq {seq}");
        }
        assert_eq!(seen, [true, true], "64 draws at 2:1 reach both calls");
        let e = Methods::prepare(
            mix(r#"
                [[grpc.calls]]
                name = "get"
                method = "shop.v1.Catalog/GetItem"
                [[grpc.calls]]
                name = "watch"
                method = "shop.v1.Catalog/Watch"
                messages = 2
            "#),
            &pool().1,
        )
        .err()
        .unwrap()
        .to_string();
        assert!(
            e.starts_with("targets.grpc.calls.watch.messages:")
                && e.contains("one request message"),
            "{e}"
        );
    }

    #[test]
    fn requests_render_per_call_or_once() {
        let method = prepare("request = '{\"id\": {{id}}}'").unwrap();
        assert!(method.constant.is_none());
        let mut scratch = Scratch::default();
        let framed = method.encode(&Call::item(300), &mut scratch).unwrap();
        assert_eq!(&framed[..], &[0, 0, 0, 0, 3, 0x08, 0xac, 0x02]);
        let constant = prepare("request = '{\"id\": \"7\"}'").unwrap();
        let framed = constant.constant.clone().unwrap();
        assert_eq!(&framed[..], &[0, 0, 0, 0, 2, 0x08, 7]);
        assert_eq!(
            constant.encode(&Call::item(1), &mut scratch).unwrap(),
            framed
        );
    }

    #[test]
    fn setup_errors_name_the_setting() {
        let pool = pool().1;
        let cases = [
            ("request = '{\"nope\": 1}'", "targets.grpc.request"),
            ("request = '{\"id\": \"x\"}'", "targets.grpc.request"),
            ("request = '{\"id\": 1} trailing'", "targets.grpc.request"),
            (
                "expect_fields = [\"nonexistent\"]",
                "has no field 'nonexistent'",
            ),
            ("expect_fields = [\"tags.x\"]", "not a single message field"),
            ("expect_fields = [\"owner.\"]", "empty field name"),
        ];
        for (extra, want) in cases {
            let e = Methods::prepare(calls(extra), &pool)
                .err()
                .unwrap_or_else(|| panic!("{extra} accepted"))
                .to_string();
            assert!(e.contains(want), "{extra}: {e}");
        }
        let other = |method: &str| {
            let text = format!(
                "[grpc]\naddress = \"http://127.0.0.1:1\"\nmethod = \"{method}\"\nproto = [\"shop.proto\"]"
            );
            let targets: Targets = toml::from_str(&text).unwrap();
            let Some(Calls::Grpc(c)) = targets.calls(Api::Grpc, &|_| None).unwrap() else {
                unreachable!()
            };
            Methods::prepare(c, &pool).err().unwrap().to_string()
        };
        // A server-streaming method is prepared; its answers are streams.
        let text = "[grpc]\naddress = \"http://127.0.0.1:1\"\nmethod = \"shop.v1.Catalog/Watch\"\nproto = [\"shop.proto\"]";
        let targets: Targets = toml::from_str(text).unwrap();
        let Some(Calls::Grpc(c)) = targets.calls(Api::Grpc, &|_| None).unwrap() else {
            unreachable!()
        };
        let watch = Methods::prepare(c, &pool).unwrap();
        let method = watch.for_call(&Call::item(1));
        assert!(method.server_streaming());
        assert_eq!(method.request_messages(), 0);
        let e = other("shop.v1.Catalog/Nope");
        assert!(e.contains("no method Nope (it has: GetItem, Watch)"), "{e}");
        let e = other("shop.v2.Catalog/GetItem");
        assert!(e.contains("no service shop.v2.Catalog"), "{e}");
    }

    #[test]
    fn expected_fields_follow_protobuf_presence() {
        let method =
            prepare("expect_fields = [\"name\", \"owner.name\", \"tags\", \"stock\", \"id\"]")
                .unwrap();
        // The three scalars without presence are named before the run, each with the value
        // check to write instead; the others are not.
        assert_eq!(method.notes.len(), 3, "{:?}", method.notes);
        for (path, suggestion) in [("name", "!= ''"), ("owner.name", "!= ''"), ("id", ">= 0")] {
            let note = method
                .notes
                .iter()
                .find(|n| n.contains(&format!("'{path}'")))
                .unwrap_or_else(|| panic!("no note for {path}: {:?}", method.notes));
            assert!(
                note.contains("without presence")
                    && note.contains(&format!(
                        "expect_values = {{ \"{path}\" = \"{suggestion}\" }}"
                    )),
                "{note}"
            );
        }
        let owner = method
            .output
            .parent_pool()
            .get_message_by_name("shop.v1.Owner")
            .unwrap();
        let mut full = DynamicMessage::new(method.output.clone());
        full.set_field_by_name("name", Value::String("widget".into()));
        let mut o = DynamicMessage::new(owner);
        o.set_field_by_name("name", Value::String("ann".into()));
        full.set_field_by_name("owner", Value::Message(o));
        full.set_field_by_name("tags", Value::List(vec![Value::String("a".into())]));
        // `optional`: present even at its default.
        full.set_field_by_name("stock", Value::I32(0));
        method.check(full.encode_to_vec().into()).unwrap();
        // A scalar without presence at its default is a valid answer (id 0, an empty name):
        // the wire leaves it out, so "missing" cannot be told from 0.
        let mut zero = full.clone();
        zero.set_field_by_name("id", Value::U64(0));
        zero.set_field_by_name("name", Value::String(String::new()));
        method.check(zero.encode_to_vec().into()).unwrap();
        // What has presence is checked: an empty list, an unset optional, a missing message.
        for (field, empty) in [("tags", Some(Value::List(Vec::new()))), ("stock", None)] {
            let mut m = full.clone();
            match empty {
                Some(v) => m.set_field_by_name(field, v),
                None => {
                    m.clear_field_by_name(field);
                }
            }
            let f = method.check(m.encode_to_vec().into()).unwrap_err();
            assert_eq!(f.class, FailureClass::MissingData);
            assert_eq!(f.code.as_deref(), Some(field));
        }
        let mut no_owner = full.clone();
        no_owner.clear_field_by_name("owner");
        let f = method.check(no_owner.encode_to_vec().into()).unwrap_err();
        assert_eq!(f.code.as_deref(), Some("owner.name"));
        let f = method.check(Bytes::from_static(&[0xff])).unwrap_err();
        assert_eq!(f.class, FailureClass::BadBody);
    }

    #[test]
    fn expected_values_compare_the_decoded_value_defaults_included() {
        let method = prepare(
            "expect_fields = [\"id\"]\nexpect_values = { id = \">= 0\", \"owner.name\" = \"!= ''\", stock = \"< 10\" }",
        )
        .unwrap();
        // The value check is written: no note.
        assert!(method.notes.is_empty(), "{:?}", method.notes);
        let owner = method
            .output
            .parent_pool()
            .get_message_by_name("shop.v1.Owner")
            .unwrap();
        let mut m = DynamicMessage::new(method.output.clone());
        let mut o = DynamicMessage::new(owner);
        o.set_field_by_name("name", Value::String("ann".into()));
        m.set_field_by_name("owner", Value::Message(o.clone()));
        // id 0 (not on the wire) and an unset stock (0) pass.
        method.check(m.encode_to_vec().into()).unwrap();
        let mut over = m.clone();
        over.set_field_by_name("stock", Value::I32(12));
        let f = method.check(over.encode_to_vec().into()).unwrap_err();
        assert_eq!(f.class, FailureClass::MissingData);
        assert_eq!(f.code.as_deref(), Some("stock"));
        assert!(
            f.detail.contains("stock is 12, expected < 10"),
            "{}",
            f.detail
        );
        let mut unnamed = m.clone();
        o.set_field_by_name("name", Value::String(String::new()));
        unnamed.set_field_by_name("owner", Value::Message(o));
        let f = method.check(unnamed.encode_to_vec().into()).unwrap_err();
        assert!(f.detail.contains("owner.name is \"\""), "{}", f.detail);
        let mut no_owner = m.clone();
        no_owner.clear_field_by_name("owner");
        let f = method.check(no_owner.encode_to_vec().into()).unwrap_err();
        assert_eq!(f.code.as_deref(), Some("owner.name"));

        for (extra, want) in [
            (
                "expect_values = { owner = \"!= 0\" }",
                "has no value to compare",
            ),
            (
                "expect_values = { tags = \"!= ''\" }",
                "repeated field or map",
            ),
            (
                "expect_values = { id = \"== true\" }",
                "does not compare with a uint64",
            ),
            ("expect_values = { nope = \">= 0\" }", "has no field 'nope'"),
        ] {
            let e = Methods::prepare(calls(extra), &pool().1)
                .err()
                .unwrap_or_else(|| panic!("{extra} accepted"))
                .to_string();
            assert!(
                e.contains("targets.grpc.expect_values") && e.contains(want),
                "{extra}: {e}"
            );
        }
        let text = "[grpc]\naddress = \"http://127.0.0.1:1\"\nmethod = \"shop.v1.Catalog/GetItem\"\nproto = [\"shop.proto\"]\nexpect_values = { id = \"at least 0\" }";
        let targets: Targets = toml::from_str(text).unwrap();
        let e = targets.calls(Api::Grpc, &|_| None).unwrap_err();
        assert!(
            e.contains("targets.grpc.expect_values.id") && e.contains("operator"),
            "{e}"
        );
    }
}
