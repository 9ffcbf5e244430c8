//! gRPC client: unary calls in gRPC's wire format (length-prefixed protobuf, grpc-status
//! trailers) on an HTTP/2 connection we open ourselves (the `http2-client` crate's [`H2Conn`], shared with the HTTP/2 stack), so a
//! "new connection" is exactly one new socket and handshake (no channel pool, no reconnects).
//! tonic's client machinery cost twice h2load's CPU per call here (scripts/compare-anchors),
//! which would make the load generator measure itself; the server is tonic's.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use bench_core::net::{TcpConnector, WireCounters};
use bench_core::workload::{validate_item, ItemView};
use bench_core::{
    Client, ClientSettings, Connected, Connection, Failure, FailureClass, PayloadProfile, Reply,
    WireBytes,
};
use http2_client::{H2Conn, RequestHead};

use crate::pb::GetItemRequest;
use crate::wire::{check_status, frame, unframe};

pub struct GrpcClient {
    connector: TcpConnector,
    payload: PayloadProfile,
    https: bool,
    authority: String,
}

impl GrpcClient {
    pub fn new(settings: &ClientSettings) -> anyhow::Result<Self> {
        Ok(GrpcClient {
            connector: TcpConnector::new(settings, crate::ALPN)?,
            payload: settings.payload,
            https: settings.tls.is_some(),
            authority: format!("{}:{}", settings.server_name, settings.target.port()),
        })
    }
}

/// A unary call's request head: the method's path and gRPC's two required fields.
const CALL: RequestHead<'static> = RequestHead {
    method: "POST",
    path: crate::GET_ITEM_PATH,
    fields: &crate::wire::GRPC_FIELDS,
    keep: crate::wire::KEEP,
};

#[async_trait]
impl Client for GrpcClient {
    async fn connect(&self) -> Result<Connected, Failure> {
        let (conn, counters, timing) =
            crate::wire::open(&self.connector, &self.authority, self.https).await?;
        Ok(Connected {
            conn: Arc::new(GrpcConnection {
                conn,
                counters,
                payload: self.payload,
            }),
            timing,
        })
    }
}

struct GrpcConnection {
    conn: H2Conn,
    counters: Arc<WireCounters>,
    payload: PayloadProfile,
}

#[async_trait]
impl Connection for GrpcConnection {
    async fn request(&self, call: bench_core::Call) -> Result<Reply, Failure> {
        let id = call.id;
        let answer = self
            .conn
            .exchange(&CALL, Some(frame(&GetItemRequest { id })), Instant::now())
            .await?;
        check_status(&answer)?;
        let message = unframe(&answer.body)?;
        let view = decode_item_view(&message).map_err(|e| {
            Failure::new(FailureClass::BadBody, format!("invalid protobuf item: {e}"))
        })?;
        validate_item(&view, id, self.payload)?;
        Ok(Reply {
            reopened: None,
            ttfb: answer.ttfb,
            total: answer.total,
            body_bytes: message.len() as u64,
        })
    }

    fn wire_bytes(&self) -> WireBytes {
        self.counters.snapshot()
    }

    async fn close(&self) {
        self.conn.close().await;
    }
}

/// Decodes the fields validation needs from an `Item` without allocating: the same wire rules
/// as prost's generated decoder (tags, wire types, lengths, UTF-8 strings), but the strings
/// are borrowed from the received bytes and unknown fields skipped.
fn decode_item_view(mut buf: &[u8]) -> Result<ItemView<'_>, String> {
    use prost::encoding::{decode_key, decode_varint, skip_field, DecodeContext, WireType};
    let mut view = ItemView::default();
    let expect = |got: WireType, want: WireType, tag: u32| {
        if got == want {
            Ok(())
        } else {
            Err(format!(
                "field {tag} has wire type {got:?}, expected {want:?}"
            ))
        }
    };
    while !buf.is_empty() {
        let (tag, wire_type) = decode_key(&mut buf).map_err(|e| e.to_string())?;
        match tag {
            1 => {
                expect(wire_type, WireType::Varint, tag)?;
                view.id = Some(decode_varint(&mut buf).map_err(|e| e.to_string())?);
            }
            2 | 4 | 7 => {
                expect(wire_type, WireType::LengthDelimited, tag)?;
                let len = decode_varint(&mut buf).map_err(|e| e.to_string())? as usize;
                if len > buf.len() {
                    return Err(format!("field {tag} is {len} bytes, {} remain", buf.len()));
                }
                let (field, rest) = buf.split_at(len);
                buf = rest;
                let text = std::str::from_utf8(field).map_err(|e| format!("field {tag}: {e}"))?;
                match tag {
                    2 => view.name = Some(text.into()),
                    4 => view.currency = Some(text.into()),
                    _ => view.description_len = Some(text.len()),
                }
            }
            _ => skip_field(wire_type, tag, &mut buf, DecodeContext::default())
                .map_err(|e| e.to_string())?,
        }
    }
    // proto3 omits empty strings and zero numbers: absent means default, as prost decodes it.
    view.id.get_or_insert(0);
    view.name.get_or_insert_with(|| "".into());
    view.currency.get_or_insert_with(|| "".into());
    view.description_len.get_or_insert(0);
    Ok(view)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb::Item;
    use bytes::Bytes;
    use prost::Message;

    #[test]
    fn view_decoder_agrees_with_prost() {
        for profile in PayloadProfile::ALL {
            let item = Item {
                id: 42,
                name: "widget".into(),
                price_cents: 1999,
                currency: "EUR".into(),
                in_stock: true,
                tags: vec!["bench".into(), "item".into()],
                description: bench_core::workload::padding(profile),
            };
            let bytes = item.encode_to_vec();
            let view = decode_item_view(&bytes).unwrap();
            assert_eq!(view.id, Some(42));
            assert_eq!(view.name.as_deref(), Some("widget"));
            assert_eq!(view.currency.as_deref(), Some("EUR"));
            assert_eq!(view.description_len, Some(profile.padding_bytes()));
            validate_item(&view, 42, profile).unwrap();
        }
        assert!(decode_item_view(&[0xff, 0xff, 0xff]).is_err());
        assert!(
            decode_item_view(&[0x12, 0x05, b'a']).is_err(),
            "truncated string"
        );
        assert!(
            decode_item_view(&[0x12, 0x02, 0xc3, 0x28]).is_err(),
            "invalid UTF-8"
        );
        let empty = decode_item_view(&[]).unwrap();
        assert_eq!(empty.name.as_deref(), Some(""));
        assert_eq!(empty.id, Some(0));
    }

    /// The gRPC length-prefixed message reader and the item decoder on random bytes and on
    /// mutations of valid answers (stable in-process fuzzing, seeded PRNG): ≈ 2 s by default,
    /// `TBENCH_FUZZ_SECONDS` for longer, `TBENCH_FUZZ_SEED` to replay. Nothing may panic, and
    /// what the reader accepts is exactly one message of its prefix's length.
    #[test]
    fn fuzz_grpc_message_reader() {
        let secs: f64 = std::env::var("TBENCH_FUZZ_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(2.0);
        let seed: u64 = std::env::var("TBENCH_FUZZ_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
            });
        eprintln!("grpc reader: TBENCH_FUZZ_SEED={seed}");
        let mut state = seed | 1;
        let mut next = move || {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            state.wrapping_mul(0x2545_f491_4f6c_dd1d)
        };
        let valid: Vec<Vec<u8>> = PayloadProfile::ALL
            .iter()
            .map(|&profile| {
                let item = Item {
                    id: 7,
                    name: "widget".into(),
                    price_cents: 1999,
                    currency: "EUR".into(),
                    in_stock: true,
                    tags: vec!["bench".into(), "item".into()],
                    description: bench_core::workload::padding(profile),
                };
                let message = item.encode_to_vec();
                let mut framed = vec![0];
                framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
                framed.extend_from_slice(&message);
                framed
            })
            .collect();
        let start = std::time::Instant::now();
        let mut executions = 0u64;
        while executions == 0 || start.elapsed().as_secs_f64() < secs {
            let mut data = if next() % 4 == 0 {
                let len = (next() % 64) as usize;
                (0..len).map(|_| next() as u8).collect()
            } else {
                valid[(next() % valid.len() as u64) as usize].clone()
            };
            for _ in 0..=next() % 4 {
                if data.is_empty() {
                    break;
                }
                let at = (next() % data.len() as u64) as usize;
                match next() % 4 {
                    0 => data[at] ^= 1 << (next() % 8),
                    1 => data[at] = next() as u8,
                    2 => data.truncate(at),
                    _ => data.insert(at, next() as u8),
                }
            }
            let bytes = Bytes::from(data);
            if let Ok(message) = unframe(&bytes) {
                assert_eq!(bytes.len(), 5 + message.len());
                assert_eq!(bytes[0], 0);
                if let Ok(view) = decode_item_view(&message) {
                    let _ = validate_item(&view, 7, PayloadProfile::Small);
                }
            }
            executions += 1;
        }
        eprintln!(
            "grpc reader: {executions} executions in {:.1} s (seed {seed}), no crash",
            start.elapsed().as_secs_f64()
        );
    }
}
