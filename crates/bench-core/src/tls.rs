//! Certificates (an rcgen ECDSA P-256 CA and a server certificate) and the rustls configs
//! every stack uses, so TLS 1.3 and verification are the same on all four stacks.

use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls::client::Resumption;

use rustls_pki_types::pem::PemObject;
pub use rustls_pki_types::CertificateDer;
use rustls_pki_types::PrivateKeyDer;

/// Sessions the server's stateful TLS session cache holds.
pub const SESSION_CACHE_SIZE: usize = 65_536;

/// How every stack's TLS is set up, for the manifest.
pub fn tls_settings() -> String {
    format!("TLS 1.3 only, ECDSA P-256 certificate, ring provider, stateful session cache of {SESSION_CACHE_SIZE}, 2 tickets per handshake (none, and no cache, in full-handshake cells)")
}

/// Names the server certificate is valid for; clients connect with [`SERVER_NAME`].
pub const SERVER_NAME: &str = "localhost";

/// Installs ring as the process-wide rustls provider (only one provider is compiled in, but
/// tonic and quinn call `builder()` internally, which needs it installed). Idempotent.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Where the CA and server certificate live.
#[derive(Debug, Clone)]
pub struct CertPaths {
    pub dir: PathBuf,
}

impl CertPaths {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        CertPaths { dir: dir.into() }
    }
    pub fn ca_cert(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }
    pub fn server_cert(&self) -> PathBuf {
        self.dir.join("server.pem")
    }
    pub fn server_key(&self) -> PathBuf {
        self.dir.join("server.key")
    }
    /// A client certificate from the same CA (a mesh's sidecars authenticate each other
    /// with it: mutual TLS); made with the CA, so absent from directories made before it.
    pub fn client_cert(&self) -> PathBuf {
        self.dir.join("client.pem")
    }
    pub fn client_key(&self) -> PathBuf {
        self.dir.join("client.key")
    }
    fn lock(&self) -> PathBuf {
        self.dir.join(".lock")
    }
    fn complete(&self) -> bool {
        // Not the client certificate: a directory from before it, or with certificates of the
        // user's own, stays as it is (a mesh path that needs one says so).
        self.ca_cert().is_file() && self.server_cert().is_file() && self.server_key().is_file()
    }
}

/// Creates the CA and server certificate in `dir` unless all files are already there.
///
/// Several processes may start at once (parallel tests), so generation happens under a lock
/// file and the others wait for it; the key is written owner-only.
pub fn ensure_certs(dir: &Path) -> anyhow::Result<CertPaths> {
    let paths = CertPaths::new(dir);
    if paths.complete() {
        return Ok(paths);
    }
    fs::create_dir_all(dir)
        .with_context(|| format!("cannot create certificate directory {}", dir.display()))?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(paths.lock())
        {
            Ok(_) => break,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                if paths.complete() {
                    return Ok(paths);
                }
                if Instant::now() > deadline {
                    // A generator died holding the lock; take it over.
                    let _ = fs::remove_file(paths.lock());
                    continue;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(e).with_context(|| format!("cannot write in {}", dir.display())),
        }
    }
    let result = if paths.complete() {
        Ok(())
    } else {
        generate(&paths)
    };
    let _ = fs::remove_file(paths.lock());
    result.map(|_| paths)
}

/// Checks a certificate directory before anything runs with it: the files read, and the
/// server's key belongs to its certificate, so that a wrong directory is one line of bad
/// input rather than every cell's server failing to start. Whether the certificate verifies
/// for the name clients use is left to the handshakes: a server with the wrong name is a
/// condition the suite measures (every handshake `tls_failed`).
pub fn check_certs(paths: &CertPaths) -> anyhow::Result<()> {
    install_crypto_provider();
    let identity = ServerIdentity::load(paths)?;
    load_ca(&paths.ca_cert())?;
    let provider = rustls::crypto::ring::default_provider();
    rustls::sign::CertifiedKey::from_der(identity.chain, identity.key, &provider).map_err(
        |e| {
            anyhow::anyhow!(
                "{} does not belong to the certificate {} ({e}); give a directory whose server.key and server.pem match, or an empty one to have them made",
                paths.server_key().display(),
                paths.server_cert().display()
            )
        },
    )?;
    Ok(())
}

fn generate(paths: &CertPaths) -> anyhow::Result<()> {
    let ca_key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "transport-bench local CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let server_key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
    let mut params = CertificateParams::new(vec![SERVER_NAME.to_string()])?;
    params
        .subject_alt_names
        .push(SanType::IpAddress(std::net::Ipv4Addr::LOCALHOST.into()));
    params
        .subject_alt_names
        .push(SanType::IpAddress(std::net::Ipv6Addr::LOCALHOST.into()));
    params
        .distinguished_name
        .push(DnType::CommonName, SERVER_NAME);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let server_cert = params.signed_by(&server_key, &issuer)?;

    let client_key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
    let mut params = CertificateParams::new(vec![SERVER_NAME.to_string()])?;
    params
        .distinguished_name
        .push(DnType::CommonName, "transport-bench mesh client");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let client_cert = params.signed_by(&client_key, &issuer)?;

    write_file(&paths.ca_cert(), ca_cert.pem().as_bytes(), 0o644)?;
    write_file(&paths.server_cert(), server_cert.pem().as_bytes(), 0o644)?;
    write_file(
        &paths.server_key(),
        server_key.serialize_pem().as_bytes(),
        0o600,
    )?;
    write_file(&paths.client_cert(), client_cert.pem().as_bytes(), 0o644)?;
    write_file(
        &paths.client_key(),
        client_key.serialize_pem().as_bytes(),
        0o600,
    )?;
    Ok(())
}

/// Writes via a temporary file and rename, so readers never see half a PEM.
fn write_file(path: &Path, contents: &[u8], mode: u32) -> anyhow::Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    f.write_all(contents)?;
    f.sync_all()?;
    fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// The server's certificate chain and private key, loaded once per server process.
pub struct ServerIdentity {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

impl std::fmt::Debug for ServerIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Identity({} certificates, key hidden)", self.chain.len())
    }
}

impl ServerIdentity {
    /// A certificate chain and its key from PEM files (a client's mTLS identity).
    pub fn from_files(cert: &Path, key: &Path) -> anyhow::Result<Self> {
        let chain = CertificateDer::pem_file_iter(cert)
            .with_context(|| format!("cannot read certificate {}", cert.display()))?
            .collect::<Result<Vec<_>, _>>()
            .with_context(|| format!("bad PEM in {}", cert.display()))?;
        if chain.is_empty() {
            bail!("no certificate in {}", cert.display());
        }
        let key = PrivateKeyDer::from_pem_file(key)
            .with_context(|| format!("cannot read key {}", key.display()))?;
        Ok(ServerIdentity { chain, key })
    }

    pub fn load(paths: &CertPaths) -> anyhow::Result<Self> {
        let chain = CertificateDer::pem_file_iter(paths.server_cert())
            .with_context(|| format!("cannot read {}", paths.server_cert().display()))?
            .collect::<Result<Vec<_>, _>>()
            .with_context(|| format!("bad PEM in {}", paths.server_cert().display()))?;
        let key = PrivateKeyDer::from_pem_file(paths.server_key())
            .with_context(|| format!("cannot read key {}", paths.server_key().display()))?;
        Ok(ServerIdentity { chain, key })
    }
}

/// Loads the CA certificates a client trusts.
pub fn load_ca(path: &Path) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(path)
        .with_context(|| format!("cannot read CA {}", path.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("bad PEM in CA {}", path.display()))?;
    if certs.is_empty() {
        bail!("no certificate in CA file {}", path.display());
    }
    Ok(certs)
}

/// How a client sets up TLS: full handshake every time, or resumption with a session cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HandshakeVariant {
    /// A full handshake on every new connection (no session cache): the study's setting.
    #[default]
    Full,
    /// TLS 1.3 / QUIC session resumption from tickets cached by the client.
    Resumed,
    /// QUIC 0-RTT: resumption plus the request in the first flight (HTTP/3 only).
    ZeroRtt,
}

impl HandshakeVariant {
    pub fn as_str(self) -> &'static str {
        match self {
            HandshakeVariant::Full => "full",
            HandshakeVariant::Resumed => "resumed",
            HandshakeVariant::ZeroRtt => "zero-rtt",
        }
    }
}

/// TLS 1.3-only server config with the given ALPN protocol. Sessions are kept in a stateful
/// server cache (rustls refuses 0-RTT with stateless tickets, as a replay defence), so resuming
/// clients can resume and QUIC clients can send 0-RTT; full-handshake clients keep no tickets.
///
/// With `tickets` false the server issues no tickets and keeps no cache: every handshake is
/// full and pays for nothing that only resumption would use.
pub fn server_config(
    identity: &ServerIdentity,
    alpn: &[u8],
    tickets: bool,
) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    install_crypto_provider();
    let mut config =
        rustls::ServerConfig::builder_with_protocol_versions(&[&rustls::version::TLS13])
            .with_no_client_auth()
            .with_single_cert(identity.chain.clone(), identity.key.clone_key())
            .context("server certificate and key do not match")?;
    config.alpn_protocols = vec![alpn.to_vec()];
    if tickets {
        config.session_storage = rustls::server::ServerSessionMemoryCache::new(SESSION_CACHE_SIZE);
        config.send_tls13_tickets = 2;
    } else {
        config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
        config.send_tls13_tickets = 0;
    }
    // QUIC 0-RTT needs the server to accept early data; TCP stacks ignore this.
    config.max_early_data_size = u32::MAX;
    Ok(Arc::new(config))
}

/// Client-side TLS: what to verify the server against, and the handshake variant.
#[derive(Clone, Debug, Default)]
pub struct ClientTls {
    /// CA certificates to trust (the suite's CA for our servers, a user's private CA).
    pub ca: Vec<CertificateDer<'static>>,
    /// Trust the system's certificate store as well (a user's service with a public
    /// certificate).
    pub system_roots: bool,
    pub variant: HandshakeVariant,
    /// mTLS: the certificate chain and key the client presents.
    pub identity: Option<Arc<ServerIdentity>>,
    /// Accept any certificate (signatures are still checked): a first look at a service only.
    pub insecure: bool,
    /// Where `ca` came from, for messages (e.g. `the CA file ca.pem`); `None`: the suite's CA.
    pub ca_source: Option<String>,
}

impl ClientTls {
    /// What certificates are verified against, in words: named in the banner, the manifest
    /// and every certificate error.
    pub fn trust_source(&self) -> String {
        if self.insecure {
            return "nothing (insecure: certificates are not verified)".into();
        }
        let ca = match (&self.ca_source, self.ca.is_empty()) {
            (_, true) => None,
            (Some(source), false) => Some(source.clone()),
            (None, false) => Some("the suite's CA".to_string()),
        };
        match (ca, self.system_roots) {
            (Some(ca), true) => format!("{ca} and {}", system_trust_source()),
            (Some(ca), false) => ca,
            (None, _) => system_trust_source(),
        }
    }
}

/// The trust store the system roots are read from: `SSL_CERT_FILE` or `SSL_CERT_DIR` when
/// set (rustls-native-certs then reads them instead of the system's store).
pub fn system_trust_source() -> String {
    match (
        std::env::var_os("SSL_CERT_FILE"),
        std::env::var_os("SSL_CERT_DIR"),
    ) {
        (Some(file), _) => format!("SSL_CERT_FILE={}", file.to_string_lossy()),
        (None, Some(dir)) => format!("SSL_CERT_DIR={}", dir.to_string_lossy()),
        (None, None) => "the system trust store".into(),
    }
}

/// A certificate the client refused, said in one line with what is wrong and how to fix it.
/// It travels as the handshake's error ([`rustls::Error::Other`]), so every stack's failure
/// message carries it, and [`crate::failure::classify_error`] takes it as the detail.
#[derive(Debug, Clone)]
pub struct CertificateRefused(pub String);

impl std::fmt::Display for CertificateRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CertificateRefused {}

/// One line for the common verification failures (a CA certificate served as the server's,
/// an unknown issuer, a name mismatch, an expired or not yet valid certificate); `None` for
/// the others, whose rustls message stands.
pub fn explain_certificate_error(
    err: &rustls::CertificateError,
    server_name: &str,
    trust: &str,
) -> Option<String> {
    use rustls::CertificateError as E;
    let age = |secs: u64| match secs {
        s if s >= 2 * 86_400 => format!("{} days", s / 86_400),
        s if s >= 2 * 3_600 => format!("{} hours", s / 3_600),
        s => format!("{s} s"),
    };
    let text = match err {
        E::UnknownIssuer => format!(
            "the server's certificate is not signed by a CA this client trusts (it trusts {trust}): give the CA that signed it with --ca FILE (ca = \"FILE\" in [targets])"
        ),
        E::NotValidForName => format!(
            "the server's certificate is not valid for {server_name:?}, the name sent (SNI) and verified: connect by a name the certificate lists, or give that name with --server-name (server_name in [targets])"
        ),
        E::NotValidForNameContext { presented, .. } => format!(
            "the server's certificate is not valid for {server_name:?}, the name sent (SNI) and verified; it names {}: connect by one of those, or give it with --server-name (server_name in [targets])",
            if presented.is_empty() {
                "no name in subjectAltName".to_string()
            } else {
                presented
                    .iter()
                    .map(|n| bare_name(n))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ),
        E::Expired => "the server's certificate has expired: renew it".to_string(),
        E::ExpiredContext { time, not_after } => format!(
            "the server's certificate expired {} ago (notAfter {} s since the epoch): renew it",
            age(time.as_secs().saturating_sub(not_after.as_secs())),
            not_after.as_secs()
        ),
        E::NotValidYet => {
            "the server's certificate is not valid yet: check its notBefore and this machine's clock".to_string()
        }
        E::NotValidYetContext { time, not_before } => format!(
            "the server's certificate is not valid for another {} (notBefore {} s since the epoch): check its notBefore and this machine's clock",
            age(not_before.as_secs().saturating_sub(time.as_secs())),
            not_before.as_secs()
        ),
        E::Other(other) if is_ca_used_as_end_entity(other) => {
            "the server's certificate is a CA certificate (basicConstraints CA:TRUE), which TLS clients refuse as a server's own certificate unless it is the very certificate given with --ca: give that certificate itself with --ca (ca = \"FILE\" in [targets]), or serve a leaf certificate signed by that CA (and give the CA with --ca), or make the certificate with basicConstraints=critical,CA:FALSE".to_string()
        }
        E::InvalidPurpose | E::InvalidPurposeContext { .. } => {
            "the server's certificate is not for server authentication (its extendedKeyUsage lacks serverAuth): make it with extendedKeyUsage=serverAuth".to_string()
        }
        _ => return None,
    };
    Some(text)
}

/// webpki's `CaUsedAsEndEntity`, which rustls carries as `Other`: its name is the only handle
/// on it.
fn is_ca_used_as_end_entity(other: &rustls::OtherError) -> bool {
    format!("{other:?}").contains("CaUsedAsEndEntity")
}

/// A presented name as webpki words it (`DnsName("api.internal")`) without its wrapper.
fn bare_name(presented: &str) -> &str {
    match (presented.find('('), presented.rfind(')')) {
        (Some(open), Some(close)) if open < close => presented[open + 1..close].trim_matches('"'),
        _ => presented,
    }
}

/// The verifier of every verified client (the probe's and the load's: [`client_config`]
/// builds it): webpki's, with its common refusals explained ([`explain_certificate_error`]),
/// and one exception to webpki, a pinned self-signed certificate ([`Explaining::pinned`]).
#[derive(Debug)]
struct Explaining {
    inner: Arc<rustls::client::WebPkiServerVerifier>,
    /// The certificates of the CA file (`ClientTls::ca`). A server certificate with
    /// basicConstraints CA:TRUE, which webpki refuses as an end entity (`CaUsedAsEndEntity`),
    /// is accepted when it is byte-identical to one of them (the user named this very
    /// certificate as the one to trust, as curl's `--cacert` with OpenSSL accepts it) and is
    /// valid for the name and for server authentication; webpki has checked its validity
    /// period before its basic constraints. Anything else stays webpki's refusal.
    pinned: Vec<CertificateDer<'static>>,
    trust: String,
}

impl Explaining {
    /// The rest of the checks for a CA:TRUE certificate the CA file holds byte for byte: the
    /// name (as webpki checks it) and the extended key usage (serverAuth, when it has one).
    fn verify_pinned(
        end_entity: &CertificateDer<'_>,
        server_name: &rustls_pki_types::ServerName<'_>,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        let parsed = rustls::server::ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_name(&parsed, server_name)?;
        match allows_server_auth(end_entity) {
            Some(true) => Ok(rustls::client::danger::ServerCertVerified::assertion()),
            Some(false) => Err(rustls::CertificateError::InvalidPurpose.into()),
            None => Err(rustls::CertificateError::BadEncoding.into()),
        }
    }
}

/// Whether a certificate may authenticate a TLS server by its extendedKeyUsage extension: yes
/// without the extension, else only when it lists serverAuth (webpki's rule); `None` when the
/// DER cannot be read.
fn allows_server_auth(cert: &[u8]) -> Option<bool> {
    /// One DER element: its tag, its contents and what follows it.
    fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
        let (&tag, rest) = input.split_first()?;
        let (&first, rest) = rest.split_first()?;
        let (len, rest) = if first < 0x80 {
            (usize::from(first), rest)
        } else {
            let n = usize::from(first & 0x7f);
            if n == 0 || n > 4 || rest.len() < n {
                return None;
            }
            let len = rest[..n]
                .iter()
                .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
            (len, &rest[n..])
        };
        (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
    }
    const EKU: &[u8] = &[0x55, 0x1d, 0x25]; // 2.5.29.37
    const SERVER_AUTH: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x01]; // 1.3.6.1.5.5.7.3.1
    let (0x30, certificate, _) = tlv(cert)? else {
        return None;
    };
    let (0x30, mut tbs, _) = tlv(certificate)? else {
        return None;
    };
    // TBSCertificate's fields up to [3] extensions, which come last when present.
    let mut extensions = None;
    while !tbs.is_empty() {
        let (tag, value, rest) = tlv(tbs)?;
        if tag == 0xa3 {
            extensions = Some(value);
        }
        tbs = rest;
    }
    let Some(extensions) = extensions else {
        return Some(true);
    };
    let (0x30, mut list, _) = tlv(extensions)? else {
        return None;
    };
    while !list.is_empty() {
        let (0x30, extension, rest) = tlv(list)? else {
            return None;
        };
        list = rest;
        let (0x06, oid, mut fields) = tlv(extension)? else {
            return None;
        };
        if oid != EKU {
            continue;
        }
        // critical BOOLEAN DEFAULT FALSE, then the OCTET STRING holding the usages.
        let mut value = None;
        while !fields.is_empty() {
            let (tag, v, rest) = tlv(fields)?;
            if tag == 0x04 {
                value = Some(v);
            }
            fields = rest;
        }
        let (0x30, mut usages, _) = tlv(value?)? else {
            return None;
        };
        while !usages.is_empty() {
            let (0x06, usage, rest) = tlv(usages)? else {
                return None;
            };
            if usage == SERVER_AUTH {
                return Some(true);
            }
            usages = rest;
        }
        return Some(false);
    }
    Some(true)
}

impl rustls::client::danger::ServerCertVerifier for Explaining {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &rustls_pki_types::ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        self.inner
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
            .or_else(|e| match &e {
                rustls::Error::InvalidCertificate(rustls::CertificateError::Other(other))
                    if is_ca_used_as_end_entity(other)
                        && self
                            .pinned
                            .iter()
                            .any(|c| c.as_ref() == end_entity.as_ref()) =>
                {
                    Self::verify_pinned(end_entity, server_name)
                }
                _ => Err(e),
            })
            .map_err(|e| match &e {
                rustls::Error::InvalidCertificate(c) => {
                    match explain_certificate_error(c, &server_name.to_str(), &self.trust) {
                        Some(text) => rustls::Error::Other(rustls::OtherError(Arc::new(
                            CertificateRefused(text),
                        ))),
                        None => e,
                    }
                }
                _ => e,
            })
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

impl ClientTls {
    /// Trusting the suite's CA only, as clients of our own servers do.
    pub fn suite(ca: Vec<CertificateDer<'static>>, variant: HandshakeVariant) -> Self {
        ClientTls {
            ca,
            variant,
            ..ClientTls::default()
        }
    }
}

/// TLS 1.3-only client config: verifies the server against `tls.ca` (and the system's
/// store when asked), presents the mTLS identity if one is given.
pub fn client_config(tls: &ClientTls, alpn: &[u8]) -> anyhow::Result<Arc<rustls::ClientConfig>> {
    install_crypto_provider();
    let mut roots = rustls::RootCertStore::empty();
    for cert in &tls.ca {
        roots.add(cert.clone()).context("invalid CA certificate")?;
    }
    if tls.system_roots {
        let native = rustls_native_certs::load_native_certs();
        let (added, _ignored) = roots.add_parsable_certificates(native.certs);
        if added == 0 && tls.ca.is_empty() && !tls.insecure {
            bail!(
                "no certificate in the system's trust store ({} errors); give a CA file (ca = \"…\")",
                native.errors.len()
            );
        }
    }
    let builder = rustls::ClientConfig::builder_with_protocol_versions(&[&rustls::version::TLS13]);
    let builder = if tls.insecure {
        // Replaced below; any verifier will do until then.
        builder.with_root_certificates(roots)
    } else {
        let inner = rustls::client::WebPkiServerVerifier::builder(Arc::new(roots))
            .build()
            .context("no CA certificate to verify the server against")?;
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Explaining {
                inner,
                pinned: tls.ca.clone(),
                trust: tls.trust_source(),
            }))
    };
    let mut config = match &tls.identity {
        None => builder.with_no_client_auth(),
        Some(id) => builder
            .with_client_auth_cert(id.chain.clone(), id.key.clone_key())
            .context("client certificate and key do not match")?,
    };
    if tls.insecure {
        config
            .dangerous()
            .set_certificate_verifier(Arc::new(AnyCertificate(
                rustls::crypto::ring::default_provider().signature_verification_algorithms,
            )));
    }
    config.alpn_protocols = vec![alpn.to_vec()];
    config.resumption = match tls.variant {
        HandshakeVariant::Full => Resumption::disabled(),
        HandshakeVariant::Resumed | HandshakeVariant::ZeroRtt => {
            Resumption::in_memory_sessions(4096)
        }
    };
    // Tickets must allow early data for quinn to report a cached session (into_0rtt); the
    // resumed variant still sends nothing before the handshake completes, and tokio-rustls
    // sends TCP early data only when asked to, which it never is here.
    config.enable_early_data = tls.variant != HandshakeVariant::Full;
    Ok(Arc::new(config))
}

/// Whether the server at `addr` speaks TLS: a TLS 1.3 ClientHello (nothing else is sent) is
/// answered with a TLS record, a handshake or an alert (content type 22 or 21, version 3.x),
/// which no plaintext HTTP/1.1 or HTTP/2 server sends. For an `http://` target, whose
/// connections open (TCP) while every request then fails as a reset. `false` when the reply
/// is anything else, when the connection fails or closes without a reply, or when nothing
/// comes within `within`.
pub async fn speaks_tls(addr: std::net::SocketAddr, server_name: &str, within: Duration) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let tls = ClientTls {
        insecure: true,
        ..ClientTls::default()
    };
    let Ok(config) = client_config(&tls, b"http/1.1") else {
        return false;
    };
    let name = rustls_pki_types::ServerName::try_from(server_name.to_string())
        .unwrap_or_else(|_| rustls_pki_types::ServerName::from(addr.ip()));
    let Ok(mut conn) = rustls::ClientConnection::new(config, name) else {
        return false;
    };
    let mut hello = Vec::new();
    while conn.wants_write() {
        if conn.write_tls(&mut hello).is_err() {
            return false;
        }
    }
    let mut head = [0u8; 2];
    let answered = tokio::time::timeout(within, async {
        let mut tcp = tokio::net::TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        tcp.write_all(&hello).await?;
        tcp.read_exact(&mut head).await
    })
    .await;
    matches!(answered, Ok(Ok(_))) && matches!(head, [0x15 | 0x16, 0x03])
}

/// The `insecure` switch: any certificate chain and name is accepted, the handshake's
/// signature is still checked (the connection is encrypted, but to whom is not known).
#[derive(Debug)]
struct AnyCertificate(rustls::crypto::WebPkiSupportedAlgorithms);

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &rustls_pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certs_are_generated_once_with_private_key_owner_only() {
        let dir = tempfile::tempdir().unwrap();
        let paths = ensure_certs(dir.path()).unwrap();
        let ca_before = fs::read(paths.ca_cert()).unwrap();
        use std::os::unix::fs::PermissionsExt;
        for key in [paths.server_key(), paths.client_key()] {
            let mode = fs::metadata(&key).unwrap().permissions();
            assert_eq!(mode.mode() & 0o777, 0o600, "{}", key.display());
        }
        ensure_certs(dir.path()).unwrap();
        assert_eq!(fs::read(paths.ca_cert()).unwrap(), ca_before);
        let identity = ServerIdentity::load(&paths).unwrap();
        server_config(&identity, b"h2", true).unwrap();
        let ca = load_ca(&paths.ca_cert()).unwrap();
        client_config(&ClientTls::suite(ca, HandshakeVariant::Full), b"h2").unwrap();
    }

    /// One in-memory TLS 1.3 handshake (with the tickets that follow it); whether it resumed.
    fn handshake_resumed(
        server: &Arc<rustls::ServerConfig>,
        client: &Arc<rustls::ClientConfig>,
    ) -> bool {
        let name = rustls_pki_types::ServerName::try_from(SERVER_NAME).unwrap();
        let mut c = rustls::ClientConnection::new(client.clone(), name).unwrap();
        let mut s = rustls::ServerConnection::new(server.clone()).unwrap();
        // Enough rounds for the handshake and the post-handshake tickets.
        for _ in 0..10 {
            let mut buf = Vec::new();
            while c.wants_write() {
                c.write_tls(&mut buf).unwrap();
            }
            s.read_tls(&mut buf.as_slice()).unwrap();
            s.process_new_packets().unwrap();
            let mut buf = Vec::new();
            while s.wants_write() {
                s.write_tls(&mut buf).unwrap();
            }
            c.read_tls(&mut buf.as_slice()).unwrap();
            c.process_new_packets().unwrap();
        }
        assert!(!c.is_handshaking());
        c.handshake_kind() == Some(rustls::HandshakeKind::Resumed)
    }

    /// A server without tickets gives a resuming client nothing to resume with, so a
    /// full-handshake cell's server does no ticket work; with tickets, the second handshake
    /// resumes (the check can fail both ways).
    #[test]
    fn server_without_tickets_leaves_nothing_to_resume() {
        let dir = tempfile::tempdir().unwrap();
        let paths = ensure_certs(dir.path()).unwrap();
        let identity = ServerIdentity::load(&paths).unwrap();
        let ca = load_ca(&paths.ca_cert()).unwrap();
        for (tickets, resumes) in [(true, true), (false, false)] {
            let server = server_config(&identity, b"h2", tickets).unwrap();
            let client = client_config(
                &ClientTls::suite(ca.clone(), HandshakeVariant::Resumed),
                b"h2",
            )
            .unwrap();
            assert!(!handshake_resumed(&server, &client));
            assert_eq!(
                handshake_resumed(&server, &client),
                resumes,
                "tickets {tickets}"
            );
        }
    }

    /// A CA and a leaf it signs for `names`, valid now or, when `expired`, only in 2019 (rcgen).
    fn ca_and_leaf(names: &[&str], expired: bool) -> (CertificateDer<'static>, ServerIdentity) {
        let ca_key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        // A name of its own, so that another CA's leaf is of an unknown issuer, not a bad
        // signature.
        let unique = format!("test CA {:?}", std::time::SystemTime::now());
        ca_params
            .distinguished_name
            .push(DnType::CommonName, unique);
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        if expired {
            params.not_before = rcgen::date_time_ymd(2019, 1, 1);
            params.not_after = rcgen::date_time_ymd(2019, 12, 31);
        }
        let leaf = params.signed_by(&key, &issuer).unwrap();
        let identity = ServerIdentity {
            chain: vec![leaf.der().clone()],
            key: PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
        };
        (ca.der().clone(), identity)
    }

    /// What `openssl req -x509 -addext subjectAltName=…` makes: self-signed with CA:TRUE.
    fn self_signed_ca_for(name: &str) -> (CertificateDer<'static>, ServerIdentity) {
        self_signed_ca_with(name, |_| {})
    }

    /// [`self_signed_ca_for`] with `edit` applied to its parameters first.
    fn self_signed_ca_with(
        name: &str,
        edit: impl FnOnce(&mut CertificateParams),
    ) -> (CertificateDer<'static>, ServerIdentity) {
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let mut params = CertificateParams::new(vec![name.to_string()]).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        edit(&mut params);
        let cert = params.self_signed(&key).unwrap();
        let identity = ServerIdentity {
            chain: vec![cert.der().clone()],
            key: PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
        };
        (cert.der().clone(), identity)
    }

    /// The client's failure (as the stacks classify it) of one in-memory handshake to
    /// `server` by `name`, trusting `ca`.
    fn refused(server: &ServerIdentity, ca: CertificateDer<'static>, name: &str) -> crate::Failure {
        handshake(server, vec![ca], name).expect_err("the handshake succeeded")
    }

    /// One in-memory handshake to `server` by `name`, trusting the CA file's `ca`: the
    /// client's failure as the stacks classify it, if any.
    fn handshake(
        server: &ServerIdentity,
        ca: Vec<CertificateDer<'static>>,
        name: &str,
    ) -> Result<(), crate::Failure> {
        let server = server_config(server, b"h2", false).unwrap();
        let tls = ClientTls {
            ca_source: Some("the CA file my-ca.pem".into()),
            ..ClientTls::suite(ca, HandshakeVariant::Full)
        };
        let client = client_config(&tls, b"h2").unwrap();
        let name = rustls_pki_types::ServerName::try_from(name.to_string()).unwrap();
        let mut c = rustls::ClientConnection::new(client, name).unwrap();
        let mut s = rustls::ServerConnection::new(server).unwrap();
        for _ in 0..10 {
            let mut buf = Vec::new();
            while c.wants_write() {
                c.write_tls(&mut buf).unwrap();
            }
            s.read_tls(&mut buf.as_slice()).unwrap();
            if s.process_new_packets().is_err() {
                break;
            }
            let mut buf = Vec::new();
            while s.wants_write() {
                s.write_tls(&mut buf).unwrap();
            }
            c.read_tls(&mut buf.as_slice()).unwrap();
            if let Err(e) = c.process_new_packets() {
                let io = std::io::Error::new(std::io::ErrorKind::InvalidData, e);
                return Err(crate::failure::classify_error(
                    crate::failure::Phase::Handshake,
                    &io,
                ));
            }
            if !c.is_handshaking() {
                return Ok(());
            }
        }
        panic!("the handshake neither finished nor failed");
    }

    /// A CA:TRUE certificate for `name` signed by a CA (an intermediate CA served as the
    /// server's own certificate), and that CA.
    fn ca_signed_ca_for(name: &str) -> (CertificateDer<'static>, ServerIdentity) {
        let ca_key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "test root");
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let mut params = CertificateParams::new(vec![name.to_string()]).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let cert = params.signed_by(&key, &issuer).unwrap();
        let identity = ServerIdentity {
            chain: vec![cert.der().clone()],
            key: PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
        };
        (ca.der().clone(), identity)
    }

    /// A self-signed CA:TRUE certificate given as the CA file itself is accepted (curl with
    /// OpenSSL accepts it too), and only when the file holds it byte for byte and it is valid
    /// for the name, now, and for server authentication.
    #[test]
    fn a_self_signed_ca_certificate_given_as_the_ca_file_itself_is_accepted_and_only_so() {
        install_crypto_provider();
        let (cert, identity) = self_signed_ca_for("localhost");
        handshake(&identity, vec![cert.clone()], "localhost").expect("pinned: accepted");
        // Among other certificates of the file.
        let (other, _) = self_signed_ca_for("localhost");
        handshake(&identity, vec![other.clone(), cert.clone()], "localhost")
            .expect("pinned among others: accepted");

        // Not the file's certificate (another one with the same name): webpki's refusal.
        let f = handshake(&identity, vec![other], "localhost").unwrap_err();
        assert!(f.detail.contains("is a CA certificate"), "{}", f.detail);
        // The file's, but another name.
        let f = handshake(&identity, vec![cert], "api.example").unwrap_err();
        assert!(
            f.detail.contains("not valid for \"api.example\"")
                && f.detail.contains("it names localhost"),
            "{}",
            f.detail
        );
        // The file's, but expired.
        let (expired, identity) = self_signed_ca_with("localhost", |p| {
            p.not_before = rcgen::date_time_ymd(2019, 1, 1);
            p.not_after = rcgen::date_time_ymd(2019, 12, 31);
        });
        let f = handshake(&identity, vec![expired], "localhost").unwrap_err();
        assert!(f.detail.contains("certificate expired"), "{}", f.detail);
        // The file's, but for client authentication only.
        let (client_only, identity) = self_signed_ca_with("localhost", |p| {
            p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        });
        let f = handshake(&identity, vec![client_only], "localhost").unwrap_err();
        assert!(f.detail.contains("lacks serverAuth"), "{}", f.detail);
        // With serverAuth among its usages: accepted.
        let (server_auth, identity) = self_signed_ca_with("localhost", |p| {
            p.extended_key_usages = vec![
                ExtendedKeyUsagePurpose::ClientAuth,
                ExtendedKeyUsagePurpose::ServerAuth,
            ];
        });
        handshake(&identity, vec![server_auth], "localhost").expect("serverAuth: accepted");
    }

    #[test]
    fn the_extended_key_usage_is_read_from_the_der() {
        let (plain, _) = self_signed_ca_for("localhost");
        assert_eq!(allows_server_auth(&plain), Some(true));
        let (client, _) = self_signed_ca_with("localhost", |p| {
            p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        });
        assert_eq!(allows_server_auth(&client), Some(false));
        let (server, _) = self_signed_ca_with("localhost", |p| {
            p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        });
        assert_eq!(allows_server_auth(&server), Some(true));
        assert_eq!(allows_server_auth(&server[..server.len() - 1]), None);
        assert_eq!(allows_server_auth(b"not a certificate"), None);
    }

    #[test]
    fn a_ca_certificate_served_as_the_servers_is_explained_with_the_fix() {
        install_crypto_provider();
        // Signed by the CA the file holds, so not the file's certificate itself.
        let (ca, identity) = ca_signed_ca_for("localhost");
        let f = refused(&identity, ca, "localhost");
        assert_eq!(f.class, crate::FailureClass::TlsFailed);
        assert!(f.detail.contains("is a CA certificate"), "{}", f.detail);
        assert!(
            f.detail.contains("basicConstraints=critical,CA:FALSE"),
            "{}",
            f.detail
        );
        assert!(
            f.detail.contains("leaf certificate signed by that CA"),
            "{}",
            f.detail
        );
        assert!(!f.detail.contains("OtherError"), "{}", f.detail);
    }

    #[test]
    fn an_unknown_issuer_names_the_trust_source() {
        install_crypto_provider();
        let (_, identity) = ca_and_leaf(&["localhost"], false);
        let (other_ca, _) = ca_and_leaf(&["localhost"], false);
        let f = refused(&identity, other_ca, "localhost");
        assert!(
            f.detail.contains("not signed by a CA this client trusts"),
            "{}",
            f.detail
        );
        assert!(f.detail.contains("the CA file my-ca.pem"), "{}", f.detail);
        assert!(f.detail.contains("--ca"), "{}", f.detail);
    }

    #[test]
    fn a_name_mismatch_names_the_sni_and_the_certificates_names() {
        install_crypto_provider();
        let (ca, identity) = ca_and_leaf(&["api.internal", "api2.internal"], false);
        let f = refused(&identity, ca, "localhost");
        assert!(
            f.detail.contains("not valid for \"localhost\""),
            "{}",
            f.detail
        );
        assert!(
            f.detail.contains("api.internal, api2.internal"),
            "{}",
            f.detail
        );
        assert!(f.detail.contains("--server-name"), "{}", f.detail);
    }

    #[test]
    fn an_expired_certificate_says_so() {
        install_crypto_provider();
        let (ca, identity) = ca_and_leaf(&["localhost"], true);
        let f = refused(&identity, ca, "localhost");
        assert!(
            f.detail.contains("certificate expired") && f.detail.contains("days ago"),
            "{}",
            f.detail
        );
        assert!(f.detail.contains("renew"), "{}", f.detail);
    }

    #[test]
    fn the_trust_source_is_the_ca_file_or_the_system_store() {
        let file = ClientTls {
            ca: vec![CertificateDer::from(vec![1u8])],
            ca_source: Some("the CA file x.pem".into()),
            ..ClientTls::default()
        };
        assert_eq!(file.trust_source(), "the CA file x.pem");
        let insecure = ClientTls {
            insecure: true,
            ..ClientTls::default()
        };
        assert!(insecure.trust_source().contains("not verified"));
        let system = ClientTls {
            system_roots: true,
            ..ClientTls::default()
        };
        assert_eq!(system.trust_source(), system_trust_source());
    }
}
