//! A target method prepared for sending, whatever the transport: each request message
//! rendered from the target's JSON template and encoded with the method's descriptors, and
//! each answer decoded and checked for the expected fields, so that every gRPC stack
//! validates a user's service alike. Everything that can be wrong with the target is found
//! in [`Method::prepare`], before measuring.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, bail};
use bench_core::user_service::GrpcCalls;
use bench_core::{Call, Failure, FailureClass};
use bytes::{Bytes, BytesMut};
use prost_reflect::{
    DescriptorPool, DynamicMessage, FieldDescriptor, Kind, MessageDescriptor, Value,
};

/// The method, its message types and the checks on its answers, prepared once.
pub struct Method {
    calls: Arc<GrpcCalls>,
    input: MessageDescriptor,
    output: MessageDescriptor,
    expect: Vec<Expectation>,
    /// The framed request when every call sends the same message.
    constant: Option<Bytes>,
    /// Buffers of requests in flight, returned after each (as many as ever ran at once).
    scratch: Mutex<Vec<Scratch>>,
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
}

impl Method {
    /// The method `calls` names in `pool`, its answer checks and its request template, each
    /// checked; an error names the setting at fault.
    pub fn prepare(calls: Arc<GrpcCalls>, pool: &DescriptorPool) -> anyhow::Result<Method> {
        let service = pool.get_service_by_name(&calls.service).ok_or_else(|| {
            anyhow!(
                "targets.grpc.method: the descriptors have no service {} (they have: {})",
                calls.service,
                names(pool.services().map(|s| s.full_name().to_string()))
            )
        })?;
        let method = service
            .methods()
            .find(|m| m.name() == calls.method)
            .ok_or_else(|| {
                anyhow!(
                    "targets.grpc.method: service {} has no method {} (it has: {})",
                    calls.service,
                    calls.method,
                    names(service.methods().map(|m| m.name().to_string()))
                )
            })?;
        let streaming = match (method.is_client_streaming(), method.is_server_streaming()) {
            (false, false) => None,
            (true, false) => Some("client-streaming"),
            (false, true) => Some("server-streaming"),
            (true, true) => Some("bidirectional streaming"),
        };
        if let Some(kind) = streaming {
            bail!(
                "targets.grpc.method: {} is a {kind} method; only unary methods can be measured",
                calls.path
            );
        }
        let input = method.input();
        let output = method.output();
        let expect = calls
            .expect_fields
            .iter()
            .map(|path| Expectation::resolve(&output, path))
            .collect::<anyhow::Result<_>>()?;
        let mut method = Method {
            calls,
            input,
            output,
            expect,
            constant: None,
            scratch: Mutex::new(Vec::new()),
        };
        // The template must make a valid message before anything is measured.
        let first = Call {
            id: method.calls.ids.from,
            seq: 0,
            worker: 0,
        };
        let mut json = String::new();
        method.calls.render_request(&first, &mut json);
        let message = json_message(&method.input, &json).map_err(|e| {
            anyhow!(
                "targets.grpc.request: not a {} in protobuf's JSON mapping (rendered for id {}): {e}",
                method.input.full_name(),
                first.id
            )
        })?;
        if method.calls.request_is_constant() {
            method.constant = Some(grpc_wire::frame(&message));
        }
        Ok(method)
    }

    /// The target's calls.
    pub fn calls(&self) -> &GrpcCalls {
        &self.calls
    }

    /// The framed request message for `call`.
    pub fn encode(&self, call: &Call, scratch: &mut Scratch) -> Result<Bytes, Failure> {
        if let Some(constant) = &self.constant {
            return Ok(constant.clone());
        }
        scratch.json.clear();
        self.calls.render_request(call, &mut scratch.json);
        let message = json_message(&self.input, &scratch.json).map_err(|e| {
            Failure::new(
                FailureClass::Other,
                format!(
                    "targets.grpc.request rendered for id {} is not a {}: {e}",
                    call.id,
                    self.input.full_name()
                ),
            )
            .with_code("request_encoding")
        })?;
        Ok(grpc_wire::frame_into(&message, &mut scratch.frame))
    }

    /// The answer's message, with every expected field present.
    pub fn check(&self, message: Bytes) -> Result<(), Failure> {
        let decoded = DynamicMessage::decode(self.output.clone(), message).map_err(|e| {
            Failure::new(
                FailureClass::BadBody,
                format!("invalid protobuf {}: {e}", self.output.full_name()),
            )
        })?;
        match self.expect.iter().find(|e| !e.present_in(&decoded)) {
            None => Ok(()),
            Some(missing) => Err(Failure::new(
                FailureClass::MissingData,
                format!("field {} is missing or empty in the answer", missing.path),
            )
            .with_code(missing.path.clone())),
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
    fn resolve(output: &MessageDescriptor, path: &str) -> anyhow::Result<Expectation> {
        let bad = |why: String| anyhow!("targets.grpc.expect_fields: '{path}': {why}");
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
        Ok(Expectation {
            path: path.to_string(),
            fields,
        })
    }

    /// Present as protobuf defines it: a field with presence (messages, `optional`, oneof
    /// members) is set; any other (proto3 scalars, repeated, maps) is not its default/empty.
    fn present_in(&self, message: &DynamicMessage) -> bool {
        let Some((last, parents)) = self.fields.split_last() else {
            return false;
        };
        let mut message = message;
        for field in parents {
            if !message.has_field(field) {
                return false;
            }
            match message.get_field(field) {
                Cow::Borrowed(Value::Message(inner)) => message = inner,
                _ => return false,
            }
        }
        message.has_field(last)
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
        Method::prepare(calls(extra), &pool().1)
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
            let e = Method::prepare(calls(extra), &pool)
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
            Method::prepare(c, &pool).err().unwrap().to_string()
        };
        let e = other("shop.v1.Catalog/Watch");
        assert!(e.contains("server-streaming") && e.contains("unary"), "{e}");
        let e = other("shop.v1.Catalog/Nope");
        assert!(e.contains("no method Nope (it has: GetItem, Watch)"), "{e}");
        let e = other("shop.v2.Catalog/GetItem");
        assert!(e.contains("no service shop.v2.Catalog"), "{e}");
    }

    #[test]
    fn expected_fields_follow_protobuf_presence() {
        let method =
            prepare("expect_fields = [\"name\", \"owner.name\", \"tags\", \"stock\"]").unwrap();
        let item = method.output.clone();
        let owner = method
            .output
            .parent_pool()
            .get_message_by_name("shop.v1.Owner")
            .unwrap();
        let mut full = DynamicMessage::new(item.clone());
        full.set_field_by_name("name", Value::String("widget".into()));
        let mut o = DynamicMessage::new(owner);
        o.set_field_by_name("name", Value::String("ann".into()));
        full.set_field_by_name("owner", Value::Message(o));
        full.set_field_by_name("tags", Value::List(vec![Value::String("a".into())]));
        // `optional`: present even at its default.
        full.set_field_by_name("stock", Value::I32(0));
        method.check(full.encode_to_vec().into()).unwrap();
        for (field, empty) in [
            ("name", Value::String(String::new())),
            ("tags", Value::List(Vec::new())),
        ] {
            let mut m = full.clone();
            m.set_field_by_name(field, empty);
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
        let _ = item;
    }
}
