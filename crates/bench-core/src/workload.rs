//! The one workload every stack serves: an item looked up by id, with a padding field whose
//! size comes from the payload profile, plus server-side fault injection for tests.
//!
//! JSON rendering and validation live here so that the three REST stacks answer and check
//! byte-for-byte the same thing; the gRPC stack maps the same fields to protobuf.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use serde::{Deserialize, Serialize};

use crate::failure::{Failure, FailureClass};
use crate::service_time::ServiceTimeSpec;

/// Fixed field values of the item; only `id` (echoed) and `description` (padding) vary.
pub const ITEM_NAME: &str = "widget";
pub const ITEM_PRICE_CENTS: i64 = 1999;
pub const ITEM_CURRENCY: &str = "EUR";
pub const ITEM_IN_STOCK: bool = true;
pub const ITEM_TAGS: [&str; 2] = ["bench", "item"];

/// REST path prefix: `GET /items/{id}`.
pub const ITEMS_PATH: &str = "/items/";
/// Readiness path on the REST stacks.
pub const HEALTH_PATH: &str = "/healthz";

/// Size class of the item's padding field, so payload size can be swept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum PayloadProfile {
    /// ≈ 256 B JSON body (the default).
    #[default]
    Small,
    /// ≈ 4 KiB JSON body.
    #[serde(rename = "4k")]
    K4,
    /// ≈ 64 KiB JSON body.
    #[serde(rename = "64k")]
    K64,
}

impl PayloadProfile {
    pub const ALL: [PayloadProfile; 3] = [
        PayloadProfile::Small,
        PayloadProfile::K4,
        PayloadProfile::K64,
    ];

    /// Length of the `description` padding in bytes (ASCII, so also characters). Chosen so the
    /// whole JSON body of a 6-digit id is close to 256 B, 4 KiB and 64 KiB.
    pub fn padding_bytes(self) -> usize {
        match self {
            PayloadProfile::Small => 134,
            PayloadProfile::K4 => 3_974,
            PayloadProfile::K64 => 65_414,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PayloadProfile::Small => "small",
            PayloadProfile::K4 => "4k",
            PayloadProfile::K64 => "64k",
        }
    }
}

impl fmt::Display for PayloadProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for PayloadProfile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "small" => Ok(PayloadProfile::Small),
            "4k" => Ok(PayloadProfile::K4),
            "64k" => Ok(PayloadProfile::K64),
            other => Err(format!(
                "unknown payload profile '{other}', expected small, 4k or 64k"
            )),
        }
    }
}

/// Deterministic ASCII padding (no characters that JSON would escape).
pub fn padding(profile: PayloadProfile) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    (0..profile.padding_bytes())
        .map(|i| ALPHABET[i % ALPHABET.len()] as char)
        .collect()
}

/// Renders the JSON item quickly: everything after the id is fixed per profile, so a response
/// is a prefix, the id's digits and a shared suffix.
#[derive(Debug, Clone)]
pub struct ItemRenderer {
    suffix: Bytes,
}

impl ItemRenderer {
    pub fn new(profile: PayloadProfile) -> Self {
        let tags: Vec<String> = ITEM_TAGS.iter().map(|t| format!("\"{t}\"")).collect();
        let suffix = format!(
            ",\"name\":\"{ITEM_NAME}\",\"price_cents\":{ITEM_PRICE_CENTS},\"currency\":\"{ITEM_CURRENCY}\",\"in_stock\":{ITEM_IN_STOCK},\"tags\":[{}],\"description\":\"{}\"}}",
            tags.join(","),
            padding(profile)
        );
        ItemRenderer {
            suffix: Bytes::from(suffix),
        }
    }

    /// The item with `id` as a JSON object.
    pub fn json(&self, id: u64) -> Bytes {
        let mut buf = BytesMut::with_capacity(self.suffix.len() + 28);
        buf.put_slice(b"{\"id\":");
        buf.put_slice(id.to_string().as_bytes());
        buf.put_slice(&self.suffix);
        buf.freeze()
    }

    /// A JSON item that decodes but lacks the required `name` (the missing-data fault).
    pub fn json_missing_field(&self, id: u64) -> Bytes {
        Bytes::from(format!(
            "{{\"id\":{id},\"price_cents\":{ITEM_PRICE_CENTS}}}"
        ))
    }
}

/// The fields validation looks at, whatever the encoding was.
#[derive(Debug, Default)]
pub struct ItemView<'a> {
    pub id: Option<u64>,
    pub name: Option<Cow<'a, str>>,
    pub currency: Option<Cow<'a, str>>,
    pub description_len: Option<usize>,
}

/// Success only if the id is echoed and the required fields are present with the expected
/// padding size; the same rule for JSON and protobuf.
pub fn validate_item(
    view: &ItemView<'_>,
    expected_id: u64,
    profile: PayloadProfile,
) -> Result<(), Failure> {
    let missing = |what: &str| Failure::new(FailureClass::MissingData, what.to_string());
    match view.id {
        None => return Err(missing("id missing")),
        Some(id) if id != expected_id => {
            return Err(missing(&format!(
                "id {id} echoed for request {expected_id}"
            )))
        }
        _ => {}
    }
    if view.name.as_deref().is_none_or(str::is_empty) {
        return Err(missing("name missing"));
    }
    if view.currency.as_deref().is_none_or(str::is_empty) {
        return Err(missing("currency missing"));
    }
    match view.description_len {
        None => Err(missing("description missing")),
        Some(n) if n != profile.padding_bytes() => Err(missing(&format!(
            "description is {n} B, profile {profile} needs {}",
            profile.padding_bytes()
        ))),
        _ => Ok(()),
    }
}

#[derive(Deserialize)]
struct JsonItem<'a> {
    id: Option<u64>,
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    currency: Option<Cow<'a, str>>,
    #[serde(borrow)]
    description: Option<Cow<'a, str>>,
}

/// Decodes and validates a JSON item body: undecodable → `bad_body`, incomplete → `missing_data`.
pub fn validate_json_item(
    body: &[u8],
    expected_id: u64,
    profile: PayloadProfile,
) -> Result<(), Failure> {
    let item: JsonItem<'_> = serde_json::from_slice(body)
        .map_err(|e| Failure::new(FailureClass::BadBody, format!("invalid JSON item: {e}")))?;
    let view = ItemView {
        id: item.id,
        name: item.name,
        currency: item.currency,
        description_len: item.description.map(|d| d.len()),
    };
    validate_item(&view, expected_id, profile)
}

/// A REST answer judged as the item `id`: HTTP 200 (else `bad_status` with the status as its
/// code, as a target's REST answers have it; the connection stays usable) and a valid JSON item; the same rule on every REST stack.
pub fn rest_reply(
    status: u16,
    body: &[u8],
    id: u64,
    profile: PayloadProfile,
    ttfb: Duration,
    total: Duration,
) -> Result<crate::reply::Reply, Failure> {
    if status != 200 {
        return Err(
            Failure::new(FailureClass::BadStatus, format!("HTTP status {status}"))
                .with_code(status.to_string()),
        );
    }
    validate_json_item(body, id, profile)?;
    Ok(crate::reply::Reply {
        messages: 0,
        reopened: None,
        streamed: false,
        ttfb,
        total,
        body_bytes: body.len() as u64,
    })
}

/// The request path for an item.
pub fn item_path(id: u64) -> String {
    format!("{ITEMS_PATH}{id}")
}

/// What the server does wrong on purpose, so that classification and timing can be tested.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// HTTP 500 / gRPC INTERNAL.
    Status,
    /// A body that does not decode.
    BadBody,
    /// A body that decodes but lacks a required field.
    MissingField,
    /// A correct answer after the given delay.
    Delay(Duration),
    /// The whole server stalls for the given time: every request arriving before the stall
    /// ends waits for it (a GC pause or a blocked event loop), for coordinated-omission tests.
    Stall(Duration),
}

/// A fault kind applied to a fraction of requests, spread evenly (every 1/fraction-th request).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaultSpec {
    pub kind: FaultKind,
    pub fraction: f64,
}

impl FromStr for FaultSpec {
    type Err = String;

    /// `status`, `bad-body`, `missing-field` or `delay-<N>ms`, optionally `:<fraction>` (default 1).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (kind, fraction) = match s.split_once(':') {
            Some((k, f)) => (
                k,
                f.parse::<f64>()
                    .map_err(|_| format!("fault fraction '{f}' is not a number"))?,
            ),
            None => (s, 1.0),
        };
        if !(0.0..=1.0).contains(&fraction) {
            return Err(format!("fault fraction {fraction} is outside 0..1"));
        }
        let kind = match kind {
            "status" => FaultKind::Status,
            "bad-body" => FaultKind::BadBody,
            "missing-field" => FaultKind::MissingField,
            k if k.ends_with("ms") && (k.starts_with("delay-") || k.starts_with("stall-")) => {
                let ms = &k["delay-".len()..k.len() - 2];
                let d = Duration::from_millis(
                    ms.parse()
                        .map_err(|_| format!("fault time '{ms}' is not a whole number of ms"))?,
                );
                if k.starts_with("delay-") {
                    FaultKind::Delay(d)
                } else {
                    FaultKind::Stall(d)
                }
            }
            other => {
                return Err(format!(
                    "unknown fault '{other}', expected status, bad-body, missing-field, delay-<N>ms or stall-<N>ms"
                ))
            }
        };
        Ok(FaultSpec { kind, fraction })
    }
}

impl fmt::Display for FaultSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            FaultKind::Status => write!(f, "status")?,
            FaultKind::BadBody => write!(f, "bad-body")?,
            FaultKind::MissingField => write!(f, "missing-field")?,
            FaultKind::Delay(d) => write!(f, "delay-{}ms", d.as_millis())?,
            FaultKind::Stall(d) => write!(f, "stall-{}ms", d.as_millis())?,
        }
        write!(f, ":{}", self.fraction)
    }
}

/// Decides, per request, whether the configured fault applies; lock-free and deterministic.
#[derive(Debug)]
pub struct FaultInjector {
    spec: Option<FaultSpec>,
    counter: AtomicU64,
    /// End of the current stall, for the stall fault.
    stall_until: std::sync::Mutex<Option<std::time::Instant>>,
}

impl FaultInjector {
    pub fn new(spec: Option<FaultSpec>) -> Self {
        FaultInjector {
            spec,
            counter: AtomicU64::new(0),
            stall_until: std::sync::Mutex::new(None),
        }
    }

    /// The fault for the next request, if any: request i is faulted when ⌊(i+1)·f⌋ > ⌊i·f⌋.
    /// A stall starts on such a request and delays every request until it ends.
    pub fn next(&self) -> Option<FaultKind> {
        let spec = self.spec?;
        let i = self.counter.fetch_add(1, Ordering::Relaxed) as f64;
        let fire = ((i + 1.0) * spec.fraction).floor() > (i * spec.fraction).floor();
        let FaultKind::Stall(length) = spec.kind else {
            return fire.then_some(spec.kind);
        };
        let now = std::time::Instant::now();
        let mut until = self.stall_until.lock().expect("stall lock");
        if fire && until.is_none_or(|u| u <= now) {
            *until = Some(now + length);
        }
        until
            .filter(|u| *u > now)
            .map(|u| FaultKind::Delay(u - now))
    }
}

/// A REST answer, independent of the HTTP version that carries it.
#[derive(Debug, Clone)]
pub struct RestReply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Bytes,
    /// Wait this long before answering (the delay fault).
    pub delay: Option<Duration>,
}

/// Everything a server needs to answer the workload: the renderer, the fault injector and the
/// per-request service time.
#[derive(Debug)]
pub struct ServerWorkload {
    pub renderer: ItemRenderer,
    pub faults: FaultInjector,
    pub service_time: ServiceTimeSpec,
}

impl ServerWorkload {
    pub fn new(
        profile: PayloadProfile,
        fault: Option<FaultSpec>,
        service_time: ServiceTimeSpec,
    ) -> Self {
        ServerWorkload {
            renderer: ItemRenderer::new(profile),
            faults: FaultInjector::new(fault),
            service_time,
        }
    }

    /// The REST routing of the workload: `GET /items/{id}`, `GET /healthz`, else 404/405.
    pub fn rest(&self, method: &str, path: &str) -> RestReply {
        let text = |status, body: &'static str| RestReply {
            status,
            content_type: "text/plain",
            body: Bytes::from_static(body.as_bytes()),
            delay: None,
        };
        if method != "GET" {
            return text(405, "method not allowed\n");
        }
        if path == HEALTH_PATH {
            return text(200, "ok\n");
        }
        let Some(id) = path.strip_prefix(ITEMS_PATH) else {
            return text(404, "not found\n");
        };
        let Ok(id) = id.parse::<u64>() else {
            return text(400, "item id must be an unsigned integer\n");
        };
        let json = |body| RestReply {
            status: 200,
            content_type: "application/json",
            body,
            delay: None,
        };
        // The service's CPU work runs here, on the handler's thread; its wait joins the delay.
        let wait = self.service_time.begin(id);
        let reply = match self.faults.next() {
            None => json(self.renderer.json(id)),
            Some(FaultKind::Status) => text(500, "injected fault\n"),
            Some(FaultKind::BadBody) => json(Bytes::from_static(b"{\"id\":")),
            Some(FaultKind::MissingField) => json(self.renderer.json_missing_field(id)),
            Some(FaultKind::Delay(d) | FaultKind::Stall(d)) => RestReply {
                delay: Some(d),
                ..json(self.renderer.json(id))
            },
        };
        let delay = reply.delay.unwrap_or_default() + wait;
        RestReply {
            delay: (!delay.is_zero()).then_some(delay),
            ..reply
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendered_item_validates_and_has_profile_size() {
        for profile in PayloadProfile::ALL {
            let r = ItemRenderer::new(profile);
            let body = r.json(123_456);
            validate_json_item(&body, 123_456, profile).unwrap();
            let target = match profile {
                PayloadProfile::Small => 256,
                PayloadProfile::K4 => 4096,
                PayloadProfile::K64 => 65536,
            };
            assert_eq!(body.len(), target, "{profile}");
        }
    }

    #[test]
    fn validation_distinguishes_bad_body_and_missing_data() {
        let p = PayloadProfile::Small;
        let r = ItemRenderer::new(p);
        assert_eq!(
            validate_json_item(b"{\"id\":", 1, p).unwrap_err().class,
            FailureClass::BadBody
        );
        assert_eq!(
            validate_json_item(&r.json_missing_field(1), 1, p)
                .unwrap_err()
                .class,
            FailureClass::MissingData
        );
        assert_eq!(
            validate_json_item(&r.json(2), 1, p).unwrap_err().class,
            FailureClass::MissingData
        );
        assert_eq!(
            validate_json_item(&r.json(1), 1, PayloadProfile::K4)
                .unwrap_err()
                .class,
            FailureClass::MissingData
        );
    }

    #[test]
    fn fault_fraction_is_spread_evenly() {
        let inj = FaultInjector::new(Some("status:0.25".parse().unwrap()));
        let hits: Vec<bool> = (0..8).map(|_| inj.next().is_some()).collect();
        assert_eq!(hits.iter().filter(|h| **h).count(), 2);
        assert_eq!(hits, [false, false, false, true, false, false, false, true]);
        let none = FaultInjector::new(None);
        assert!((0..10).all(|_| none.next().is_none()));
    }

    #[test]
    fn fault_specs_parse_and_reject() {
        assert_eq!(
            "delay-50ms:0.5".parse::<FaultSpec>().unwrap(),
            FaultSpec {
                kind: FaultKind::Delay(Duration::from_millis(50)),
                fraction: 0.5
            }
        );
        assert!("explode".parse::<FaultSpec>().is_err());
        assert!("status:2".parse::<FaultSpec>().is_err());
        assert!("delay-xms".parse::<FaultSpec>().is_err());
        assert_eq!(
            "stall-300ms:0.01".parse::<FaultSpec>().unwrap().to_string(),
            "stall-300ms:0.01"
        );
    }

    #[test]
    fn a_stall_delays_every_request_until_it_ends() {
        let inj = FaultInjector::new(Some("stall-200ms:0.5".parse().unwrap()));
        assert_eq!(inj.next(), None);
        let Some(FaultKind::Delay(first)) = inj.next() else {
            panic!("the second request starts the stall");
        };
        assert!(first > Duration::from_millis(150));
        let Some(FaultKind::Delay(third)) = inj.next() else {
            panic!("a request during the stall waits for its end");
        };
        assert!(third <= first);
    }

    #[test]
    fn rest_routes() {
        let w = ServerWorkload::new(PayloadProfile::Small, None, ServiceTimeSpec::default());
        assert_eq!(w.rest("GET", "/healthz").status, 200);
        assert_eq!(w.rest("GET", "/items/abc").status, 400);
        assert_eq!(w.rest("GET", "/nope").status, 404);
        assert_eq!(w.rest("POST", "/items/1").status, 405);
        let ok = w.rest("GET", "/items/7");
        assert_eq!(ok.status, 200);
        validate_json_item(&ok.body, 7, PayloadProfile::Small).unwrap();
    }
}
