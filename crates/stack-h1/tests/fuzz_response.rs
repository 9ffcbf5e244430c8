//! A fuzz harness for the HTTP/1.1 response parser that runs on stable in `cargo test`:
//! valid responses from a generator (checked exactly), then the same responses mutated
//! (checked for invariants), each fed in random pieces.
//!
//! Runs for 2 s by default; `TBENCH_FUZZ_SECONDS=600` runs ten minutes and
//! `TBENCH_FUZZ_SEED=<n>` replays a seed. A failure prints the seed and the input.

use std::time::{Duration, Instant};

use stack_h1::response::{BodyFraming, Event, FramingError, Head, ResponseLimits, ResponseParser};

/// SplitMix64: small, fast and good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// A generated response and what a correct parser makes of it.
struct Valid {
    bytes: Vec<u8>,
    head_request: bool,
    interims: Vec<u16>,
    head: Head,
    body: Vec<u8>,
    /// The body runs to EOF.
    until_close: bool,
}

fn random_case(rng: &mut Rng, name: &str) -> String {
    name.chars()
        .map(|c| {
            if rng.chance(30) {
                c.to_ascii_uppercase()
            } else {
                c
            }
        })
        .collect()
}

fn filler_header(rng: &mut Rng, out: &mut Vec<u8>) {
    const NAMES: [&str; 8] = [
        "content-type",
        "date",
        "server",
        "set-cookie",
        "cache-control",
        "x-request-id",
        "vary",
        "link",
    ];
    let name = *rng.pick(&NAMES);
    let name = random_case(rng, name);
    let value_len = rng.below(40);
    let value: String = (0..value_len)
        .map(|_| (b' ' + rng.below(95) as u8) as char)
        .collect();
    out.extend_from_slice(format!("{name}: {}\r\n", value.trim()).as_bytes());
}

fn generate(rng: &mut Rng) -> Valid {
    let mut bytes = Vec::new();
    let mut interims = Vec::new();
    for _ in 0..rng.below(3) {
        let status = *rng.pick(&[100u16, 102, 103]);
        interims.push(status);
        bytes.extend_from_slice(format!("HTTP/1.1 {status} Interim\r\n").as_bytes());
        for _ in 0..rng.below(3) {
            filler_header(rng, &mut bytes);
        }
        bytes.extend_from_slice(b"\r\n");
    }
    let http10 = rng.chance(10);
    let status = *rng.pick(&[200u16, 200, 200, 201, 204, 304, 404, 500, 503]);
    let head_request = rng.chance(5);
    let no_body = head_request || status == 204 || status == 304;
    // 0: Content-Length, 1: chunked, 2: until close.
    let mut kind = *rng.pick(&[0, 0, 1, 1, 2]);
    if http10 && kind == 1 {
        kind = 0;
    }
    let body_len = if rng.chance(5) {
        rng.below(70_000)
    } else {
        rng.below(600)
    };
    let body = if no_body {
        Vec::new()
    } else {
        rng.bytes(body_len)
    };
    let close = rng.chance(15);
    let keep_alive_token = rng.chance(30);
    let version = if http10 { "1.0" } else { "1.1" };
    bytes.extend_from_slice(format!("HTTP/{version} {status} Whatever\r\n").as_bytes());
    let mut lines: Vec<Vec<u8>> = Vec::new();
    for _ in 0..rng.below(8) {
        let mut line = Vec::new();
        filler_header(rng, &mut line);
        lines.push(line);
    }
    let framing_len = if no_body && rng.chance(50) {
        Some(rng.below(100))
    } else if kind == 0 {
        Some(body.len())
    } else {
        None
    };
    if let Some(n) = framing_len {
        let name = random_case(rng, "content-length");
        lines.push(format!("{name}: {n}\r\n").into_bytes());
        if rng.chance(10) {
            lines.push(format!("{name}:{n}, {n}\r\n").into_bytes());
        }
    } else if kind == 1 {
        let coding = if rng.chance(20) {
            "gzip, chunked"
        } else {
            "chunked"
        };
        lines.push(format!("{}: {coding}\r\n", random_case(rng, "transfer-encoding")).into_bytes());
    }
    if close {
        lines.push(b"Connection: close\r\n".to_vec());
    } else if keep_alive_token {
        lines.push(b"connection: Keep-Alive\r\n".to_vec());
    }
    let shuffle = rng.below(lines.len().max(1));
    lines.rotate_left(shuffle);
    for line in lines {
        bytes.extend_from_slice(&line);
    }
    bytes.extend_from_slice(b"\r\n");
    let framing = if no_body {
        BodyFraming::None
    } else {
        match kind {
            0 => BodyFraming::Length(body.len() as u64),
            1 => BodyFraming::Chunked,
            _ => BodyFraming::UntilClose,
        }
    };
    if !no_body {
        if kind == 1 {
            let mut rest = &body[..];
            while !rest.is_empty() {
                let n = (1 + rng.below(300)).min(rest.len());
                let size = if rng.chance(30) {
                    format!("{n:X}")
                } else {
                    format!("{:0width$x}", n, width = rng.below(4))
                };
                bytes.extend_from_slice(size.as_bytes());
                if rng.chance(20) {
                    bytes.extend_from_slice(b" ;ext=\"quoted; value\";flag");
                }
                bytes.extend_from_slice(b"\r\n");
                bytes.extend_from_slice(&rest[..n]);
                bytes.extend_from_slice(b"\r\n");
                rest = &rest[n..];
            }
            bytes.extend_from_slice(b"0\r\n");
            if rng.chance(30) {
                bytes.extend_from_slice(b"x-checksum: 1234\r\nx-more: yes\r\n");
            }
            bytes.extend_from_slice(b"\r\n");
        } else {
            bytes.extend_from_slice(&body);
        }
    }
    Valid {
        bytes,
        head_request,
        interims,
        head: Head {
            status,
            framing,
            keep_alive: !close
                && (!http10 || keep_alive_token)
                && framing != BodyFraming::UntilClose,
        },
        body,
        until_close: framing == BodyFraming::UntilClose,
    }
}

/// What feeding one input produced.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    interims: Vec<u16>,
    head: Option<Head>,
    body: Vec<u8>,
    /// Bytes after the response.
    rest: usize,
    result: Result<(), FramingError>,
}

/// Feeds `input` in pieces that end at `cuts`, then EOF, checking the parser's contract on
/// every step: consumed bytes and body ranges lie inside what was passed, every call makes
/// progress or asks for more, and the body is never longer than the input.
fn run(parser: &mut ResponseParser, input: &[u8], cuts: &[usize]) -> Outcome {
    let mut out = Outcome {
        interims: Vec::new(),
        head: None,
        body: Vec::new(),
        rest: 0,
        result: Ok(()),
    };
    let mut fed = 0;
    let mut cuts = cuts.iter().copied().chain(std::iter::once(input.len()));
    let mut start = 0;
    let mut calls = 0usize;
    let max_calls = 4 * input.len() + 64;
    loop {
        calls += 1;
        assert!(calls <= max_calls, "no progress after {calls} calls");
        let pending = &input[start..fed];
        let step = match parser.advance(pending) {
            Ok(step) => step,
            Err(e) => {
                out.result = Err(e);
                return out;
            }
        };
        assert!(step.consumed <= pending.len(), "consumed past the input");
        match &step.event {
            Event::NeedMore => {}
            Event::Done => {}
            Event::Data(range) => {
                assert!(range.start < range.end, "empty data event");
                assert_eq!(range.end, step.consumed, "data is the last thing consumed");
                out.body.extend_from_slice(&pending[range.clone()]);
            }
            Event::Interim(status) => {
                assert!(step.consumed > 0);
                out.interims.push(*status);
            }
            Event::Head(head) => {
                assert!(step.consumed > 0 && out.head.is_none());
                out.head = Some(*head);
            }
        }
        start += step.consumed;
        assert!(
            out.body.len() <= start,
            "body longer than the bytes consumed"
        );
        match step.event {
            Event::Done => {
                out.rest = input.len() - start;
                return out;
            }
            Event::NeedMore => match cuts.next() {
                Some(cut) => fed = cut.max(fed),
                None => {
                    out.result = parser.eof(&input[start..fed]);
                    return out;
                }
            },
            _ => {}
        }
    }
}

fn random_cuts(rng: &mut Rng, len: usize) -> Vec<usize> {
    let mut cuts: Vec<usize> = match rng.below(4) {
        // One byte at a time (short inputs only, to keep runs fast).
        0 if len < 4096 => (1..len).collect(),
        1 => Vec::new(),
        _ => (0..rng.below(12)).map(|_| rng.below(len + 1)).collect(),
    };
    cuts.sort_unstable();
    cuts
}

fn random_limits(rng: &mut Rng) -> ResponseLimits {
    if rng.chance(70) {
        return ResponseLimits::default();
    }
    ResponseLimits {
        max_head_bytes: 16 + rng.below(2048),
        max_headers: rng.below(20),
        max_body_bytes: rng.below(100_000) as u64,
    }
}

const TOKENS: [&[u8]; 16] = [
    b"\r\n",
    b"\r\n\r\n",
    b"\n",
    b"0\r\n\r\n",
    b";",
    b":",
    b" ",
    b"ffffffffffffffffff",
    b"chunked",
    b"Transfer-Encoding: chunked\r\n",
    b"Content-Length: 7\r\n",
    b"content-length: 99999999999999999999\r\n",
    b"Connection: close\r\n",
    b"HTTP/1.1 100 Continue\r\n\r\n",
    b"HTTP/1.1 200 OK\r\n",
    b"\"",
];

fn mutate(rng: &mut Rng, input: &mut Vec<u8>, other: &[u8]) {
    let count = if rng.chance(50) { 1 } else { 2 + rng.below(6) };
    for _ in 0..count {
        let len = input.len();
        let at = rng.below(len + 1);
        match rng.below(8) {
            0 if len > 0 => input[at.min(len - 1)] ^= 1 << rng.below(8),
            1 if len > 0 => input[at.min(len - 1)] = rng.next() as u8,
            2 => {
                let token = *rng.pick(&TOKENS);
                input.splice(at..at, token.iter().copied());
            }
            3 => {
                let end = (at + rng.below(64)).min(len);
                input.drain(at..end);
            }
            4 => {
                let end = (at + rng.below(64)).min(len);
                let copy = input[at..end].to_vec();
                let to = rng.below(input.len() + 1);
                input.splice(to..to, copy);
            }
            5 => input.truncate(at),
            6 if !other.is_empty() => {
                let from = rng.below(other.len());
                let end = (from + rng.below(512)).min(other.len());
                input.splice(at..at, other[from..end].iter().copied());
            }
            _ => {
                let digit = b"0123456789abcdefABCDEF"[rng.below(22)];
                input.insert(at, digit);
            }
        }
    }
    input.truncate(256 * 1024);
}

/// Runs one case and reports it if a check fails.
fn check<T>(seed: u64, case: u64, what: &str, input: &[u8], f: impl FnOnce() -> T) -> T {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(value) => value,
        Err(panic) => {
            let shown = &input[..input.len().min(2048)];
            eprintln!(
                "fuzz failure: seed {seed}, case {case}, {what}, {} input bytes:\n{:?}",
                input.len(),
                String::from_utf8_lossy(shown)
            );
            std::panic::resume_unwind(panic)
        }
    }
}

#[test]
fn response_parser_fuzz() {
    let seconds: f64 = std::env::var("TBENCH_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    let seed: u64 = std::env::var("TBENCH_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
    let mut rng = Rng(seed);
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let (mut valid_runs, mut mutated_runs, mut rejected) = (0u64, 0u64, 0u64);
    let mut previous: Vec<u8> = Vec::new();
    let mut case = 0u64;
    while Instant::now() < deadline {
        case += 1;
        let valid = generate(&mut rng);
        // A valid response, then the start of another: parsed exactly, in any pieces.
        let trailing = if valid.until_close {
            Vec::new()
        } else {
            b"HTTP/1.1 200 OK\r\n".to_vec()
        };
        let input = [&valid.bytes[..], &trailing].concat();
        let cuts = random_cuts(&mut rng, input.len());
        check(seed, case, "valid response", &input, || {
            let mut parser = ResponseParser::default();
            parser.begin(valid.head_request);
            let out = run(&mut parser, &input, &cuts);
            let expected = Outcome {
                interims: valid.interims.clone(),
                head: Some(valid.head),
                body: valid.body.clone(),
                rest: trailing.len(),
                result: Ok(()),
            };
            assert_eq!(out, expected);
        });
        valid_runs += 1;

        // The same response mutated: no panic, the contract holds, and the outcome does not
        // depend on how the bytes were split.
        let mut mutated = valid.bytes.clone();
        mutate(&mut rng, &mut mutated, &previous);
        let limits = random_limits(&mut rng);
        let cuts = random_cuts(&mut rng, mutated.len());
        let accepted = check(seed, case, "mutated response", &mutated, || {
            let mut whole = ResponseParser::new(limits);
            whole.begin(valid.head_request);
            let one_piece = run(&mut whole, &mutated, &[]);
            let mut split = ResponseParser::new(limits);
            split.begin(valid.head_request);
            let pieces = run(&mut split, &mutated, &cuts);
            if let (Err(a), Err(b)) = (one_piece.result, pieces.result) {
                // A head that is both too long and malformed may be refused for either.
                let head_error = |e: FramingError| {
                    matches!(
                        e,
                        FramingError::HeadTooLarge
                            | FramingError::Malformed(_)
                            | FramingError::TooManyHeaders
                            | FramingError::InvalidTrailers
                    )
                };
                assert!(a == b || (head_error(a) && head_error(b)), "{a:?} vs {b:?}");
            } else {
                assert_eq!(one_piece, pieces, "outcome depends on the split");
            }
            if one_piece.result.is_ok() {
                assert!(one_piece.body.len() as u64 <= limits.max_body_bytes);
            }
            one_piece.result.is_ok()
        });
        if !accepted {
            rejected += 1;
        }
        mutated_runs += 1;
        previous = valid.bytes;
    }
    eprintln!(
        "response parser fuzz: seed {seed}, {seconds} s, {} executions \
         ({valid_runs} valid, {mutated_runs} mutated of which {rejected} rejected), no failure",
        valid_runs + 2 * mutated_runs
    );
    assert!(valid_runs > 0);
}
