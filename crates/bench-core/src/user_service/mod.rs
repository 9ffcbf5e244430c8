//! The user's own service as the thing measured: what the experiment file says about its
//! REST and gRPC endpoints ([`Targets`]), and what a client makes of it ([`Calls`]): a
//! request per [`Call`](crate::Call) rendered from templates, and the rules that make an
//! answer a success.

pub mod data;
pub mod grpc;
pub mod mix;
pub mod rest;
pub mod secrets;
pub mod template;
pub mod value_check;

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use data::DataRows;
pub use grpc::GrpcCalls;
pub use mix::RequestMix;
pub use rest::{RenderedRequest, RestCalls};
pub use template::{Sources, Template};

/// Which family of targets a stack sends to: the REST stacks share `[targets.rest]`, the
/// gRPC stack uses `[targets.grpc]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    #[default]
    Rest,
    Grpc,
}

impl Api {
    pub fn as_str(self) -> &'static str {
        match self {
            Api::Rest => "rest",
            Api::Grpc => "grpc",
        }
    }
}

/// `[targets]` of an experiment file: the service's endpoints, and the ids and data rows
/// their templates draw from (one sequence for both, so REST and gRPC answer the same
/// questions).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Targets {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rest: Option<RestTarget>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc: Option<GrpcTarget>,
    #[serde(default)]
    pub ids: IdRange,
    /// A CSV (with a header line) or JSON-lines file whose rows `{{row.COLUMN}}` reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<PathBuf>,
    /// Headers and metadata whose values are secrets besides the built-in credential names
    /// ([`secrets::is_secret_header`]): their literal values never reach a record.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secret_headers: Vec<String>,
    /// Record request bodies (REST bodies, gRPC requests) as written in the manifest and its
    /// command line; without it a record holds only each body's size and hash
    /// ([`secrets::body`]), and the run cannot be resumed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub record_bodies: bool,
}

/// TLS towards a target: the system's trust store unless `ca` names a PEM file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TargetTls {
    pub ca: Option<PathBuf>,
    /// The name verified in the certificate and sent as SNI, if not the URL's host.
    pub server_name: Option<String>,
    /// mTLS: the client's certificate chain and key (PEM).
    pub client_cert: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
    /// Accept any certificate: a first look only; every output of such a run says so.
    pub insecure: bool,
}

/// `[targets.rest]`: one HTTP request per call, sent by every REST stack.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestTarget {
    /// `https://host:port/path?query` (templates allowed in the path and query);
    /// `http://` is plaintext.
    pub url: String,
    #[serde(default = "default_method")]
    pub method: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Request body template (POST/PUT); or `body_file` for fixed bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_file: Option<PathBuf>,
    /// Statuses that count as success (default 200).
    #[serde(default = "default_statuses")]
    pub expect_status: Vec<u16>,
    /// JSON pointers (RFC 6901) that must be present in the answer's JSON body.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expect_json: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cert: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_key: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,
    /// A mix (`[[targets.rest.requests]]`): each request `seq` sends one of these, drawn
    /// by weight ([`RequestMix`]); the target's own method, body and expectations are then
    /// not used. Empty: the short form, one request as above.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<RestRequest>,
}

/// One named request of a REST mix: the fields of the short form, per request, with a path
/// in place of the URL (scheme, host, port and TLS are the target's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestRequest {
    /// Names its rows in latency.csv and failures.csv.
    pub name: String,
    /// Relative share of the requests (default 1).
    #[serde(default = "default_weight")]
    pub weight: u32,
    #[serde(default = "default_method")]
    pub method: String,
    /// Path and query, a template starting with `/`.
    pub path: String,
    /// Added to (and overriding by name) the target's `headers`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_file: Option<PathBuf>,
    #[serde(default = "default_statuses")]
    pub expect_status: Vec<u16>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expect_json: Vec<String>,
}

/// `[targets.grpc]`: one unary call per request, its messages described by `.proto` files
/// compiled at run time or by the server's reflection service.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrpcTarget {
    /// `https://host:port` (TLS) or `http://host:port` (h2c).
    pub address: String,
    /// `package.Service/Method` (the short form; empty with `calls`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub method: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub proto: Vec<PathBuf>,
    /// Where imports of the `.proto` files are looked up (default: each file's folder).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub import_paths: Vec<PathBuf>,
    /// Ask the server for the descriptors (grpc.reflection v1, then v1alpha).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reflection: bool,
    /// The request message as a JSON template (protobuf's JSON mapping).
    #[serde(default = "default_request")]
    pub request: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
    /// Fields (dotted paths) that must be present and not empty in the decoded answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expect_fields: Vec<String>,
    /// Fields (dotted paths) whose value must pass a comparison (`">= 0"`): the check for a
    /// proto3 scalar, whose presence the wire does not show.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub expect_values: BTreeMap<String, String>,
    /// A client-streaming or bidi method: the request messages each call sends, each
    /// rendered from `request` (default 1). Unary and server-streaming methods send one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<u32>,
    /// A server-streaming or bidi method: the client ends each call this long after it
    /// began (cancelling its stream), as ghz's `--stream-call-duration` does; unset, the
    /// answer is read to its end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// Which messages of a streamed answer `expect_fields` and `expect_values` hold:
    /// `"every"` (default) or `"last"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_messages: Option<CheckMessages>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cert: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_key: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,
    /// A mix (`[[targets.grpc.calls]]`): each request `seq` makes one of these calls, drawn
    /// by weight ([`RequestMix`]); the target's own method, request and expectations are
    /// then not used (its metadata is, under each call's). Empty: the short form.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<GrpcCall>,
}

/// One named call of a gRPC mix: the per-call fields of the short form. Address, TLS and
/// the descriptors' source are the target's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrpcCall {
    /// Names its rows in latency.csv and failures.csv.
    pub name: String,
    /// Relative share of the requests (default 1).
    #[serde(default = "default_weight")]
    pub weight: u32,
    /// `package.Service/Method`.
    pub method: String,
    #[serde(default = "default_request")]
    pub request: String,
    /// Added to (and overriding by key) the target's `metadata`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expect_fields: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub expect_values: BTreeMap<String, String>,
    /// As the short form's `messages`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<u32>,
    /// As the short form's `duration_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// As the short form's `check_messages`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_messages: Option<CheckMessages>,
}

/// Which messages of a streamed gRPC answer the answer checks hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckMessages {
    /// Each message as it arrives: the first that fails them fails the call.
    #[default]
    Every,
    /// The answer's last message only, when the answer ends (or the call's `duration_ms`
    /// ends it); an answer without messages then fails them.
    Last,
}

fn default_method() -> String {
    "GET".into()
}
fn default_weight() -> u32 {
    1
}
fn default_statuses() -> Vec<u16> {
    vec![200]
}
fn default_request() -> String {
    "{}".into()
}

/// How `{{id}}` runs over its range: `seq`-th request of a phase gets the `seq`-th id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IdRange {
    /// First id (inclusive).
    pub from: u64,
    /// Last id (inclusive).
    pub to: u64,
    pub order: IdOrder,
    /// Seed of the random order (the same seed gives the same ids on every stack and run).
    pub seed: u64,
}

impl Default for IdRange {
    fn default() -> Self {
        IdRange {
            from: 1,
            to: 1_000_000,
            order: IdOrder::Sequential,
            seed: 1,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IdOrder {
    /// from, from+1, …, to, from, …
    #[default]
    Sequential,
    /// Uniform over from..=to, drawn from a seeded generator indexed by `seq`.
    Random,
}

impl IdRange {
    /// The id of request `seq`: a pure function, so any process computes the same one.
    pub fn id(&self, seq: u64) -> u64 {
        let span = self.to - self.from + 1;
        match self.order {
            IdOrder::Sequential => self.from + seq % span,
            IdOrder::Random => {
                // splitmix64 of (seed, seq), mapped onto the span by multiply-shift.
                let z = splitmix64(self.seed, seq);
                self.from + ((u128::from(z) * u128::from(span)) >> 64) as u64
            }
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.to < self.from {
            return Err(format!(
                "targets.ids: to ({}) is below from ({})",
                self.to, self.from
            ));
        }
        Ok(())
    }
}

/// splitmix64's output for element `seq` of the stream seeded with `seed`: a pure function,
/// so any process draws the same value for the same request.
pub(crate) fn splitmix64(seed: u64, seq: u64) -> u64 {
    let mut z = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(seq)
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Where a target is: scheme, host, port and the rest of the URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub https: bool,
    /// Host as written (no brackets around an IPv6 address).
    pub host: String,
    pub port: u16,
    /// `host[:port]` as written in the URL: the Host header and `:authority`.
    pub authority: String,
    /// Path and query (a template), `/` when the URL has none.
    pub path: String,
}

impl Endpoint {
    /// Parses `https://host[:port][/path]` or `http://…`; an error names the URL (without
    /// its credentials: [`secrets::url`]).
    pub fn parse(url: &str) -> Result<Endpoint, String> {
        let bad = |why: &str| format!("'{}': {why}", secrets::url(url));
        let (https, rest) = if let Some(rest) = url.strip_prefix("https://") {
            (true, rest)
        } else if let Some(rest) = url.strip_prefix("http://") {
            (false, rest)
        } else {
            return Err(bad("must start with https:// or http://"));
        };
        let (authority, path) = match rest.find(['/', '?']) {
            Some(i) if rest[i..].starts_with('/') => (&rest[..i], rest[i..].to_string()),
            Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
            None => (rest, "/".to_string()),
        };
        if authority.is_empty() {
            return Err(bad("no host"));
        }
        if authority.contains('@') {
            return Err(bad(
                "credentials in the URL are not supported; use a header",
            ));
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (host, after) = v6.split_once(']').ok_or_else(|| bad("unclosed '['"))?;
            (host.to_string(), after.strip_prefix(':'))
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), Some(p)),
                None => (authority.to_string(), None),
            }
        };
        let port = match port {
            Some(p) => p
                .parse::<u16>()
                .map_err(|_| bad(&format!("port '{p}' is not a number 1-65535")))?,
            None if https => 443,
            None => 80,
        };
        if port == 0 {
            return Err(bad("port 0"));
        }
        Ok(Endpoint {
            https,
            host,
            port,
            authority: authority.to_string(),
            path,
        })
    }

    /// The first address the host resolves to.
    pub fn resolve(&self) -> Result<SocketAddr, String> {
        (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve {}: {e}", self.host))?
            .next()
            .ok_or_else(|| format!("{} resolves to no address", self.host))
    }
}

impl RestTarget {
    /// `GET url` expecting 200, every other setting at its default.
    pub fn at(url: &str) -> RestTarget {
        serde_json::from_value(serde_json::json!({ "url": url })).expect("defaults")
    }

    pub fn tls(&self) -> TargetTls {
        TargetTls {
            ca: self.ca.clone(),
            server_name: self.server_name.clone(),
            client_cert: self.client_cert.clone(),
            client_key: self.client_key.clone(),
            insecure: self.insecure,
        }
    }
    pub fn endpoint(&self) -> Result<Endpoint, String> {
        Endpoint::parse(&self.url).map_err(|e| format!("targets.rest.url {e}"))
    }

    /// The weighted choice among `requests`; `None` for the short form.
    pub fn mix(&self, seed: u64) -> Result<Option<RequestMix>, String> {
        let entries = self.requests.iter().map(|r| (r.name.as_str(), r.weight));
        RequestMix::of(seed, entries, "targets.rest.requests")
    }
}

impl GrpcTarget {
    /// A call of `method` at `address`, every other setting at its default.
    pub fn at(address: &str, method: &str) -> GrpcTarget {
        serde_json::from_value(serde_json::json!({ "address": address, "method": method }))
            .expect("defaults")
    }

    pub fn tls(&self) -> TargetTls {
        TargetTls {
            ca: self.ca.clone(),
            server_name: self.server_name.clone(),
            client_cert: self.client_cert.clone(),
            client_key: self.client_key.clone(),
            insecure: self.insecure,
        }
    }
    /// The longest `duration_ms` of its calls, with the setting that gives it (the request
    /// timeout must exceed it).
    pub fn longest_call_duration_ms(&self) -> Option<(String, u64)> {
        let short = self
            .duration_ms
            .map(|ms| ("targets.grpc.duration_ms".to_string(), ms));
        let calls = self.calls.iter().filter_map(|c| {
            c.duration_ms
                .map(|ms| (format!("targets.grpc.calls.{}.duration_ms", c.name), ms))
        });
        short.into_iter().chain(calls).max_by_key(|(_, ms)| *ms)
    }

    /// The weighted choice among `calls`; `None` for the short form.
    pub fn mix(&self, seed: u64) -> Result<Option<RequestMix>, String> {
        let entries = self.calls.iter().map(|c| (c.name.as_str(), c.weight));
        RequestMix::of(seed, entries, "targets.grpc.calls")
    }

    pub fn endpoint(&self) -> Result<Endpoint, String> {
        let endpoint =
            Endpoint::parse(&self.address).map_err(|e| format!("targets.grpc.address {e}"))?;
        if endpoint.path != "/" {
            return Err(format!(
                "targets.grpc.address '{}': give scheme, host and port only; the path comes from `method`",
                self.address
            ));
        }
        Ok(endpoint)
    }
}

/// One API family's target, as a stack sees it.
#[derive(Debug, Clone, Copy)]
pub enum TargetRef<'a> {
    Rest(&'a RestTarget),
    Grpc(&'a GrpcTarget),
}

impl TargetRef<'_> {
    pub fn endpoint(&self) -> Result<Endpoint, String> {
        match self {
            TargetRef::Rest(t) => t.endpoint(),
            TargetRef::Grpc(t) => t.endpoint(),
        }
    }
    pub fn tls(&self) -> TargetTls {
        match self {
            TargetRef::Rest(t) => t.tls(),
            TargetRef::Grpc(t) => t.tls(),
        }
    }
}

impl Targets {
    /// Makes every relative path (protos, imports, data, body and TLS files) relative to
    /// `dir`, the experiment file's folder, so a run does not depend on where it started.
    pub fn rebase(&mut self, dir: &std::path::Path) {
        let fix = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = dir.join(&*p);
            }
        };
        let fix_opt = |p: &mut Option<PathBuf>| {
            if let Some(p) = p {
                fix(p)
            }
        };
        fix_opt(&mut self.data);
        if let Some(r) = &mut self.rest {
            fix_opt(&mut r.body_file);
            for request in &mut r.requests {
                fix_opt(&mut request.body_file);
            }
            fix_opt(&mut r.ca);
            fix_opt(&mut r.client_cert);
            fix_opt(&mut r.client_key);
        }
        if let Some(g) = &mut self.grpc {
            g.proto.iter_mut().for_each(fix);
            g.import_paths.iter_mut().for_each(fix);
            fix_opt(&mut g.ca);
            fix_opt(&mut g.client_cert);
            fix_opt(&mut g.client_key);
        }
    }

    /// The target for stacks of `api`, if the file gives one.
    pub fn for_api(&self, api: Api) -> Option<TargetRef<'_>> {
        match api {
            Api::Rest => self.rest.as_ref().map(TargetRef::Rest),
            Api::Grpc => self.grpc.as_ref().map(TargetRef::Grpc),
        }
    }

    /// The mix stacks of `api` draw their requests from, if that target has one (the seed
    /// is `[targets.ids] seed`).
    pub fn mix(&self, api: Api) -> Result<Option<RequestMix>, String> {
        match self.for_api(api) {
            Some(TargetRef::Rest(t)) => t.mix(self.ids.seed),
            Some(TargetRef::Grpc(t)) => t.mix(self.ids.seed),
            None => Ok(None),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.rest.is_none() && self.grpc.is_none()
    }

    /// The names of every mix entry: the REST target's requests, then the gRPC target's
    /// calls (what `requests.csv` rows and per-name thresholds are named by).
    pub fn request_names(&self) -> Vec<String> {
        let mut names = self.request_names_of(Api::Rest);
        names.extend(self.request_names_of(Api::Grpc));
        names
    }

    /// The names of the mix the stacks of `api` send (empty without one).
    pub fn request_names_of(&self, api: Api) -> Vec<String> {
        match api {
            Api::Rest => self
                .rest
                .iter()
                .flat_map(|t| t.requests.iter().map(|r| r.name.clone()))
                .collect(),
            Api::Grpc => self
                .grpc
                .iter()
                .flat_map(|t| t.calls.iter().map(|c| c.name.clone()))
                .collect(),
        }
    }

    /// Whether any target turns certificate verification off.
    pub fn insecure(&self) -> bool {
        self.rest.as_ref().is_some_and(|t| t.insecure)
            || self.grpc.as_ref().is_some_and(|t| t.insecure)
    }

    /// This layer with every part `other` gives replacing this one's (flags over the file).
    pub fn or_over(self, other: Targets) -> Targets {
        Targets {
            rest: other.rest.or(self.rest),
            grpc: other.grpc.or(self.grpc),
            ids: self.ids,
            data: other.data.or(self.data),
            secret_headers: self
                .secret_headers
                .into_iter()
                .chain(other.secret_headers)
                .collect(),
            record_bodies: self.record_bodies || other.record_bodies,
        }
    }

    /// The calls a client of `api` makes, with `{{env.…}}` resolved from `env` and the data
    /// file loaded; `None` when there is no target for `api` (the stack then measures our
    /// own server's item workload).
    pub fn calls(
        &self,
        api: Api,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<Calls>, String> {
        self.ids.validate()?;
        let rows = match &self.data {
            Some(path) => Some(Arc::new(DataRows::load(path)?)),
            None => None,
        };
        let sources = Sources {
            env,
            rows: rows.as_deref(),
        };
        Ok(match self.for_api(api) {
            None => None,
            Some(TargetRef::Rest(t)) => Some(Calls::Rest(Arc::new(RestCalls::compile(
                t,
                &sources,
                rows.clone(),
                self.ids,
            )?))),
            Some(TargetRef::Grpc(t)) => Some(Calls::Grpc(Arc::new(GrpcCalls::compile(
                t,
                &sources,
                rows.clone(),
                self.ids,
            )?))),
        })
    }

    /// The targets as the manifest records them: templates as written (an `{{env.…}}` stays a
    /// placeholder), the literal value of any secret header or metadata entry
    /// ([`secrets::is_secret_header`]) replaced by `<redacted>`, and URLs without userinfo or
    /// credential query values ([`secrets::url`]); bodies and gRPC requests as their size and
    /// hash ([`secrets::body`]) unless `record_bodies` (a gRPC request left at its default,
    /// `{}`, holds nothing and is kept).
    pub fn redacted(&self) -> Targets {
        let mut out = self.clone();
        let marked = &self.secret_headers;
        let keep = self.record_bodies;
        let body = |b: &mut Option<String>| {
            if let Some(text) = b.as_mut().filter(|_| !keep) {
                *text = secrets::body(text);
            }
        };
        let request = |r: &mut String| {
            if !keep && *r != default_request() {
                *r = secrets::body(r);
            }
        };
        let redact = |fields: &mut BTreeMap<String, String>| {
            for (name, value) in fields.iter_mut() {
                *value = secrets::header_value(name, value, marked);
            }
        };
        if let Some(rest) = out.rest.as_mut() {
            rest.url = secrets::url(&rest.url);
            redact(&mut rest.headers);
            body(&mut rest.body);
            for request in &mut rest.requests {
                request.path = secrets::url(&request.path);
                redact(&mut request.headers);
                body(&mut request.body);
            }
        }
        if let Some(grpc) = out.grpc.as_mut() {
            grpc.address = secrets::url(&grpc.address);
            redact(&mut grpc.metadata);
            request(&mut grpc.request);
            for call in &mut grpc.calls {
                redact(&mut call.metadata);
                request(&mut call.request);
            }
        }
        out
    }
}

/// What a stack's client sends: our server's item workload, or a target's calls.
#[derive(Debug, Clone, Default)]
pub enum Calls {
    /// `GET /items/{id}` (or `GetItem`) on our own server, validated as the item.
    #[default]
    Item,
    Rest(Arc<RestCalls>),
    Grpc(Arc<GrpcCalls>),
}

impl Calls {
    pub fn is_item(&self) -> bool {
        matches!(self, Calls::Item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_into_endpoints() {
        let e = Endpoint::parse("https://api.example:8443/v1/items/{{id}}?x=1").unwrap();
        assert_eq!(
            (e.https, e.host.as_str(), e.port, e.authority.as_str()),
            (true, "api.example", 8443, "api.example:8443")
        );
        assert_eq!(e.path, "/v1/items/{{id}}?x=1");
        let e = Endpoint::parse("http://[::1]").unwrap();
        assert_eq!((e.https, e.host.as_str(), e.port), (false, "::1", 80));
        assert_eq!(e.path, "/");
        for bad in [
            "ftp://x",
            "https://",
            "https://h:0/",
            "https://h:99999/",
            "https://u@h/",
        ] {
            assert!(Endpoint::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ids_follow_the_range_in_order_or_uniformly() {
        let seq = IdRange {
            from: 10,
            to: 12,
            ..IdRange::default()
        };
        let ids: Vec<u64> = (0..5).map(|s| seq.id(s)).collect();
        assert_eq!(ids, [10, 11, 12, 10, 11]);
        let random = IdRange {
            from: 1,
            to: 10,
            order: IdOrder::Random,
            seed: 7,
        };
        let mut counts = [0u32; 10];
        for s in 0..10_000 {
            let id = random.id(s);
            assert!((1..=10).contains(&id));
            counts[(id - 1) as usize] += 1;
        }
        // Uniform: every id near 1,000 of 10,000 (binomial sd ≈ 30).
        assert!(
            counts.iter().all(|&c| (850..1150).contains(&c)),
            "{counts:?}"
        );
        let other_seed = IdRange { seed: 8, ..random };
        assert_ne!(
            (0..20).map(|s| random.id(s)).collect::<Vec<_>>(),
            (0..20).map(|s| other_seed.id(s)).collect::<Vec<_>>()
        );
    }

    #[test]
    fn manifest_copy_hides_literal_credentials_but_keeps_placeholders() {
        let targets: Targets = toml::from_str(
            r#"
            [rest]
            url = "https://h/x"
            headers = { authorization = "Bearer {{env.T}}", "x-api-key" = "abc", accept = "application/json" }
            "#,
        )
        .unwrap();
        let r = targets.redacted();
        let h = &r.rest.unwrap().headers;
        assert_eq!(h["authorization"], "Bearer {{env.T}}");
        assert_eq!(h["x-api-key"], "<redacted>");
        assert_eq!(h["accept"], "application/json");
    }

    #[test]
    fn bodies_and_grpc_requests_are_recorded_as_size_and_hash_unless_asked_for() {
        let text = r#"
            [rest]
            url = "https://h/x"
            method = "POST"
            body = '{"user":"a","password":"hunter2"}'
            [[rest.requests]]
            name = "login"
            path = "/login"
            body = "token=hunter2"
            [grpc]
            address = "https://h:1"
            method = "p.S/M"
            request = '{"secret":"hunter2"}'
            [[grpc.calls]]
            name = "c"
            method = "p.S/N"
            "#;
        let targets: Targets = toml::from_str(text).unwrap();
        let r = targets.redacted();
        let json = serde_json::to_string(&r).unwrap();
        assert!(!json.contains("hunter2"), "{json}");
        let rest = r.rest.unwrap();
        assert_eq!(
            rest.body.as_deref(),
            Some(secrets::body(r#"{"user":"a","password":"hunter2"}"#).as_str())
        );
        assert!(rest.requests[0]
            .body
            .as_deref()
            .unwrap()
            .starts_with(secrets::BODY_PREFIX));
        let grpc = r.grpc.unwrap();
        assert!(grpc.request.starts_with(secrets::BODY_PREFIX));
        assert_eq!(
            grpc.calls[0].request, "{}",
            "the default request holds nothing"
        );
        // Asked for: kept as written.
        let kept = Targets {
            record_bodies: true,
            ..targets.clone()
        }
        .redacted();
        assert_eq!(kept.rest.as_ref().unwrap().body, targets.rest.unwrap().body);
        assert_eq!(kept.grpc.unwrap().request, r#"{"secret":"hunter2"}"#);
    }
}
