//! In-process fuzzing on stable Rust: a seeded PRNG makes inputs (structured frames from a
//! server's point of view, raw bytes, and mutations of both), fed to the frame decoder + state
//! machine and to the HPACK decoder, for a bounded time: ≈ 2 s by default, `TBENCH_FUZZ_SECONDS`
//! for longer runs, `TBENCH_FUZZ_SEED` to replay one. They check that nothing panics, memory
//! stays bounded, and the state machine's invariants hold. Run them alone with
//! `TBENCH_FUZZ_SECONDS=600 cargo test --release -p h2-transport fuzz_ -- --nocapture`.

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use crate::frame::{flag, kind, setting, HEADER_LEN};
use crate::hpack::{self, Decoder, Encoder, Indexing};
use crate::proto::{Config, Connection, Opened, RequestHead, MAX_FRAME_LEN};

/// xorshift64*: small, fast, reproducible from its seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    pub fn bytes(&mut self, max: usize) -> Vec<u8> {
        let len = self.below(max as u64 + 1) as usize;
        (0..len).map(|_| self.next() as u8).collect()
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    /// A header list from names a server uses (static-table ones among them) and random ones.
    pub fn header_list(&mut self) -> Vec<(Vec<u8>, Vec<u8>)> {
        const NAMES: [&str; 8] = [
            ":status",
            "content-type",
            "content-length",
            "grpc-status",
            "date",
            "server",
            "x-custom",
            "set-cookie",
        ];
        let count = self.below(8) as usize;
        (0..count)
            .map(|_| {
                let name = if self.below(4) == 0 {
                    self.bytes(20)
                } else {
                    self.pick(&NAMES).as_bytes().to_vec()
                };
                let value = match self.below(4) {
                    0 => b"200".to_vec(),
                    1 => self.bytes(300),
                    _ => self.bytes(20),
                };
                (name, value)
            })
            .collect()
    }

    /// Flips, overwrites, inserts or deletes a few bytes.
    fn mutate(&mut self, data: &mut Vec<u8>) {
        for _ in 0..=self.below(4) {
            if data.is_empty() {
                data.push(self.next() as u8);
                continue;
            }
            let at = self.below(data.len() as u64) as usize;
            match self.below(4) {
                0 => data[at] ^= 1 << self.below(8),
                1 => data[at] = self.next() as u8,
                2 => data.insert(at, self.next() as u8),
                _ => {
                    data.remove(at);
                }
            }
        }
    }
}

/// How long a fuzz target runs and from which seed.
fn budget() -> (Duration, u64) {
    let secs = std::env::var("TBENCH_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(2.0);
    let seed = std::env::var("TBENCH_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    (Duration::from_secs_f64(secs), seed)
}

/// Runs `case` with per-case seeds until the time is up; a panic names its seed.
fn run(name: &str, mut case: impl FnMut(&mut Rng)) {
    let (time, seed) = budget();
    let start = Instant::now();
    let mut executions = 0u64;
    while executions == 0 || start.elapsed() < time {
        let case_seed = seed.wrapping_add(executions);
        let mut rng = Rng::new(case_seed);
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| case(&mut rng)));
        if let Err(panic) = outcome {
            panic!("{name}: case with TBENCH_FUZZ_SEED={case_seed} panicked: {panic:?}");
        }
        executions += 1;
    }
    eprintln!(
        "{name}: {executions} executions in {:.1} s (seed {seed}), no crash",
        start.elapsed().as_secs_f64()
    );
}

const HEADS: [RequestHead<'static>; 2] = [
    RequestHead {
        method: "GET",
        path: "/items/1",
        fields: &[],
        keep: &["content-type"],
        answer_limit: bench_core::limits::BodyLimit::Bytes(u64::MAX),
    },
    RequestHead {
        method: "POST",
        path: "/bench.v1.ItemService/GetItem",
        fields: &[("content-type", "application/grpc"), ("te", "trailers")],
        keep: &["content-type", "grpc-status", "grpc-message"],
        answer_limit: bench_core::limits::BodyLimit::Bytes(u64::MAX),
    },
];

/// A frame a server might send, often valid, often not quite.
fn server_frame(rng: &mut Rng, enc: &mut Encoder, next_id: u32, out: &mut Vec<u8>) {
    let stream = match rng.below(8) {
        0 => 0,
        1 => rng.below(20) as u32,
        2 => rng.next() as u32 & 0x7fff_ffff,
        _ => (rng.below(u64::from(next_id / 2).max(1)) as u32) * 2 + 1,
    };
    let flags = match rng.below(3) {
        0 => rng.next() as u8,
        _ => *rng.pick(&[
            0,
            flag::END_STREAM,
            flag::END_HEADERS,
            flag::END_HEADERS | flag::END_STREAM,
            flag::PADDED | flag::END_HEADERS,
            flag::PRIORITY | flag::END_HEADERS,
        ]),
    };
    let (kind, payload): (u8, Vec<u8>) = match rng.below(12) {
        0..=2 => {
            let mut block = Vec::new();
            enc.begin_block(&mut block);
            if rng.below(3) != 0 {
                let status = rng.pick(&["200", "204", "100", "103", "404", "2x0"]);
                enc.any_field(
                    &mut block,
                    b":status",
                    status.as_bytes(),
                    Indexing::Incremental,
                );
            }
            for (n, v) in rng.header_list() {
                enc.any_field(&mut block, &n, &v, Indexing::Incremental);
            }
            let mut payload = Vec::new();
            if flags & flag::PADDED != 0 {
                payload.push(rng.below(8) as u8);
            }
            if flags & flag::PRIORITY != 0 {
                payload.extend_from_slice(&[0, 0, 0, 1, 16]);
            }
            payload.extend_from_slice(&block);
            if flags & flag::PADDED != 0 {
                payload.extend(std::iter::repeat_n(0, payload[0] as usize));
            }
            let kind = if rng.below(4) == 0 {
                kind::CONTINUATION
            } else {
                kind::HEADERS
            };
            (kind, payload)
        }
        3..=4 => {
            let max = if rng.below(8) == 0 { 20_000 } else { 300 };
            (kind::DATA, rng.bytes(max))
        }
        5 => {
            let entries: Vec<u8> = (0..rng.below(4))
                .flat_map(|_| {
                    let id = *rng.pick(&[
                        setting::HEADER_TABLE_SIZE,
                        setting::MAX_CONCURRENT_STREAMS,
                        setting::INITIAL_WINDOW_SIZE,
                        setting::MAX_FRAME_SIZE,
                        setting::MAX_HEADER_LIST_SIZE,
                        setting::ENABLE_PUSH,
                        0x77,
                    ]);
                    let value = match rng.below(3) {
                        0 => rng.next() as u32,
                        _ => rng.below(70_000) as u32,
                    };
                    let mut e = id.to_be_bytes().to_vec();
                    e.extend_from_slice(&value.to_be_bytes());
                    e
                })
                .collect();
            (kind::SETTINGS, entries)
        }
        6 => (
            kind::WINDOW_UPDATE,
            (rng.below(1 << 20) as u32).to_be_bytes().to_vec(),
        ),
        7 => (
            kind::RST_STREAM,
            (rng.below(14) as u32).to_be_bytes().to_vec(),
        ),
        8 => {
            let mut p = (rng.below(u64::from(next_id) + 2) as u32)
                .to_be_bytes()
                .to_vec();
            p.extend_from_slice(&(rng.below(14) as u32).to_be_bytes());
            (kind::GOAWAY, p)
        }
        9 => (kind::PING, rng.bytes(9)),
        10 => (rng.next() as u8, rng.bytes(40)),
        _ => (kind::PRIORITY, rng.bytes(6)),
    };
    let mut header = BytesMut::new();
    crate::frame::put_header(&mut header, payload.len(), kind, flags, stream);
    out.extend_from_slice(&header);
    out.extend_from_slice(&payload);
}

/// The frame decoder and state machine against a server that sends anything.
#[test]
fn fuzz_frame_decoder_and_state_machine() {
    run("frames", |rng| {
        let now = Instant::now();
        let mut conn = Connection::new(
            Config {
                authority: "localhost:8443".into(),
                https: rng.below(2) == 0,
                stream_window: *rng.pick(&[1000, 65_535, 1 << 20]),
                connection_window: *rng.pick(&[65_535, 4 << 20]),
            },
            now,
        );
        let mut enc = Encoder::new(4096);
        enc.set_peer_table_size(4096);
        let mut open: Vec<u32> = Vec::new();
        let mut next_id = 1;
        let mut clock = now;
        for _ in 0..rng.below(40) + 1 {
            match rng.below(6) {
                0 => {
                    let head = rng.pick(&HEADS);
                    let max = if rng.below(4) == 0 { 100_000 } else { 20 };
                    let mut body = (head.method == "POST").then(|| Bytes::from(rng.bytes(max)));
                    if let Ok(Opened::Stream(id)) = conn.open_stream(head, &mut body) {
                        assert_eq!(id, next_id, "stream ids rise by two");
                        next_id += 2;
                        open.push(id);
                    }
                }
                1 if !open.is_empty() => {
                    let id = open.swap_remove(rng.below(open.len() as u64) as usize);
                    if rng.below(2) == 0 {
                        conn.cancel(id);
                    } else if conn.poll_answer(id, now).is_none() {
                        open.push(id);
                    }
                }
                _ => {
                    let mut bytes = Vec::new();
                    for _ in 0..rng.below(6) + 1 {
                        server_frame(rng, &mut enc, next_id, &mut bytes);
                    }
                    if rng.below(4) == 0 {
                        rng.mutate(&mut bytes);
                    }
                    // Arrives in pieces, as a socket delivers it.
                    let mut rest = &bytes[..];
                    while !rest.is_empty() {
                        let n = (rng.below(rest.len() as u64) + 1) as usize;
                        conn.recv_buf().extend_from_slice(&rest[..n]);
                        rest = &rest[n..];
                        clock += Duration::from_millis(rng.below(3000));
                        conn.received(clock);
                        conn.handle_timeout(clock);
                    }
                }
            }
            // Bounded memory: the read buffer never holds more than a frame and a chunk.
            assert!(conn.recv_buf().len() <= HEADER_LEN + MAX_FRAME_LEN + 64 * 1024);
            let _ = conn.take_transmit();
            conn.drain_completed(|id| assert!(id < next_id && id % 2 == 1));
            let _ = conn.take_opener_wakes();
            if conn.is_broken() {
                assert!(conn.open_stream(&HEADS[0], &mut None).is_err());
            }
        }
        // Every stream ends in an answer or a failure once the connection closes.
        conn.close();
        for id in open {
            assert!(
                conn.poll_answer(id, now).is_some(),
                "stream {id} after close"
            );
        }
    });
}

/// The HPACK decoder on random bytes and on mutations of valid blocks.
#[test]
fn fuzz_hpack_decoder() {
    run("hpack", |rng| {
        let limit = *rng.pick(&[0, 64, 256, 4096]);
        let mut decoder = Decoder::new(limit);
        let mut encoder = Encoder::new(4096);
        encoder.set_peer_table_size(limit);
        for _ in 0..rng.below(8) + 1 {
            let mut block = Vec::new();
            if rng.below(3) == 0 {
                block = rng.bytes(200);
            } else {
                encoder.begin_block(&mut block);
                for (n, v) in rng.header_list() {
                    encoder.any_field(&mut block, &n, &v, Indexing::Incremental);
                }
                rng.mutate(&mut block);
            }
            let mut fields = 0usize;
            let _ = decoder.decode(&block, |_, _| fields += 1);
            assert!(fields <= block.len(), "a field takes at least one byte");
            assert!(
                decoder.size_within_limit(),
                "dynamic table over its maximum"
            );
            let _ = hpack::huffman_decode(&rng.bytes(30));
        }
    });
}
