//! Failure classes and the one place that maps errors onto them.
//!
//! Every stack reports a failed connect or request as a [`Failure`]; the class is what the
//! results count, the detail is kept only as an example message per class.

use std::error::Error as StdError;
use std::fmt;
use std::io;

/// Why a request did not count as a success. Each failed request is counted under exactly one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FailureClass {
    /// The peer actively refused the TCP connection (ECONNREFUSED), or no QUIC server answered.
    ConnectRefused,
    /// The TCP connect did not finish within the connect timeout.
    ConnectTimeout,
    /// No local address/port could be bound for the connection (EADDRNOTAVAIL, ephemeral ports).
    AddrUnavailable,
    /// The process ran out of file descriptors (EMFILE/ENFILE).
    FdExhausted,
    /// The connection was reset or closed before the exchange completed.
    ConnReset,
    /// The TLS handshake failed (certificate, alert, protocol error).
    TlsFailed,
    /// The TLS-over-TCP or QUIC handshake did not finish within the handshake timeout.
    HandshakeTimeout,
    /// An established QUIC connection hit its idle timeout.
    QuicIdleTimeout,
    /// The request did not complete within the request timeout.
    RequestTimeout,
    /// The server answered with a non-success status (HTTP != 200, gRPC != OK).
    BadStatus,
    /// The body could not be decoded (invalid JSON, invalid protobuf, bad framing).
    BadBody,
    /// The body decoded but the echoed id or a required field was missing or wrong.
    MissingData,
    /// Anything the classifier does not recognise; its example message says what it was.
    Other,
}

impl FailureClass {
    /// All classes, in the order of the CSV columns.
    pub const ALL: [FailureClass; 13] = [
        FailureClass::ConnectRefused,
        FailureClass::ConnectTimeout,
        FailureClass::AddrUnavailable,
        FailureClass::FdExhausted,
        FailureClass::ConnReset,
        FailureClass::TlsFailed,
        FailureClass::HandshakeTimeout,
        FailureClass::QuicIdleTimeout,
        FailureClass::RequestTimeout,
        FailureClass::BadStatus,
        FailureClass::BadBody,
        FailureClass::MissingData,
        FailureClass::Other,
    ];

    /// Stable snake_case name used in CSV headers and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::ConnectRefused => "connect_refused",
            FailureClass::ConnectTimeout => "connect_timeout",
            FailureClass::AddrUnavailable => "addr_unavailable",
            FailureClass::FdExhausted => "fd_exhausted",
            FailureClass::ConnReset => "conn_reset",
            FailureClass::TlsFailed => "tls_failed",
            FailureClass::HandshakeTimeout => "handshake_timeout",
            FailureClass::QuicIdleTimeout => "quic_idle_timeout",
            FailureClass::RequestTimeout => "request_timeout",
            FailureClass::BadStatus => "bad_status",
            FailureClass::BadBody => "bad_body",
            FailureClass::MissingData => "missing_data",
            FailureClass::Other => "other",
        }
    }

    /// Index into [`FailureClass::ALL`], for fixed-size per-class counters.
    pub fn index(self) -> usize {
        FailureClass::ALL
            .iter()
            .position(|c| *c == self)
            .expect("every class is in ALL")
    }

    /// Whether the connection cannot be trusted after this failure and must be replaced.
    /// Application-level answers (a 500, a bad body) leave the connection usable.
    pub fn breaks_connection(self) -> bool {
        !matches!(
            self,
            FailureClass::BadStatus | FailureClass::BadBody | FailureClass::MissingData
        )
    }
}

impl fmt::Display for FailureClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A classified failure with a human-readable example of what happened.
#[derive(Debug, Clone)]
pub struct Failure {
    pub class: FailureClass,
    pub detail: String,
    /// What kind of failure within its class, when the answer names one (the HTTP status,
    /// the gRPC status code's name, the missing JSON pointer): `failures.csv` counts each.
    pub code: Option<String>,
    unprocessed: bool,
    stream_only: bool,
}

impl Failure {
    pub fn new(class: FailureClass, detail: impl Into<String>) -> Self {
        Failure {
            class,
            detail: detail.into(),
            code: None,
            unprocessed: false,
            stream_only: false,
        }
    }

    /// This failure with its kind within the class (see [`Failure::code`]).
    pub fn with_code(self, code: impl Into<String>) -> Self {
        Failure {
            code: Some(code.into()),
            ..self
        }
    }

    /// A failure of one stream of a multiplexed connection (the server reset it, or it broke
    /// a stream-level rule, RFC 9113 §5.4.2): the request fails as `class`, and the connection
    /// and the other requests on it go on.
    pub fn stream(class: FailureClass, detail: impl Into<String>) -> Self {
        Failure {
            stream_only: true,
            ..Failure::new(class, detail)
        }
    }

    /// Whether the connection must be replaced after this failure: its class says so, unless
    /// only the request's own stream failed.
    pub fn breaks_connection(&self) -> bool {
        self.class.breaks_connection() && !self.stream_only
    }

    /// A request the server has not processed and will not (an HTTP/2 stream above the last
    /// stream id of the server's GOAWAY, or one it refused with REFUSED_STREAM; RFC 9113
    /// §8.7), so it may be sent again on a new connection. Its class is
    /// [`FailureClass::ConnReset`]: the connection takes no new requests, and a caller that
    /// does not retry counts it as before.
    pub fn unprocessed(detail: impl Into<String>) -> Self {
        Failure {
            unprocessed: true,
            ..Failure::new(FailureClass::ConnReset, detail)
        }
    }

    /// Whether the server did not process the request (see [`Failure::unprocessed`]).
    pub fn is_unprocessed(&self) -> bool {
        self.unprocessed
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.class, self.detail)
    }
}

impl StdError for Failure {}

/// Which step of the exchange an error came from; decides what a bare timeout or an
/// unrecognised error means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Opening the TCP socket or the UDP socket for QUIC.
    Connect,
    /// The TLS or QUIC handshake.
    Handshake,
    /// Sending a request and reading its answer on an established connection.
    Request,
}

/// Maps an error to its class by walking its source chain for I/O and TLS causes.
///
/// Stacks first map the error types only they know (hyper, quinn, h3, tonic) and call this for
/// everything else, so the OS- and TLS-level rules live in one place.
pub fn classify_error(phase: Phase, err: &(dyn StdError + 'static)) -> Failure {
    let detail = error_chain_text(err);
    let mut cause: Option<&(dyn StdError + 'static)> = Some(err);
    while let Some(e) = cause {
        if let Some(f) = e.downcast_ref::<Failure>() {
            return f.clone();
        }
        if let Some(tls) = e.downcast_ref::<rustls::Error>() {
            return tls_failure(tls, detail);
        }
        if let Some(io_err) = e.downcast_ref::<io::Error>() {
            // io::Error::source() skips a wrapped error, so look inside explicitly.
            if let Some(inner) = io_err.get_ref() {
                if let Some(f) = inner.downcast_ref::<Failure>() {
                    return f.clone();
                }
                if let Some(tls) = inner.downcast_ref::<rustls::Error>() {
                    return tls_failure(tls, detail);
                }
            }
            if let Some(class) = classify_io(phase, io_err) {
                return Failure::new(class, detail);
            }
        }
        cause = e.source();
    }
    let class = match phase {
        Phase::Connect => FailureClass::Other,
        Phase::Handshake => FailureClass::TlsFailed,
        Phase::Request => FailureClass::Other,
    };
    Failure::new(class, detail)
}

/// A TLS failure; a refused certificate that the verifier explained
/// ([`crate::tls::CertificateRefused`]) has its explanation as the detail.
fn tls_failure(err: &rustls::Error, detail: String) -> Failure {
    let explained = match err {
        rustls::Error::Other(other) => other
            .0
            .downcast_ref::<crate::tls::CertificateRefused>()
            .map(|c| format!("certificate refused: {c}")),
        _ => None,
    };
    Failure::new(FailureClass::TlsFailed, explained.unwrap_or(detail))
}

/// Maps an I/O error by errno first, then by kind; `None` when it says nothing specific.
pub fn classify_io(phase: Phase, err: &io::Error) -> Option<FailureClass> {
    if let Some(code) = err.raw_os_error() {
        let class = match code {
            libc::ECONNREFUSED => Some(FailureClass::ConnectRefused),
            libc::EADDRNOTAVAIL | libc::EADDRINUSE => Some(FailureClass::AddrUnavailable),
            libc::EMFILE | libc::ENFILE => Some(FailureClass::FdExhausted),
            libc::ECONNRESET | libc::EPIPE | libc::ECONNABORTED => Some(FailureClass::ConnReset),
            libc::ETIMEDOUT => Some(timeout_class(phase)),
            _ => None,
        };
        if class.is_some() {
            return class;
        }
    }
    match err.kind() {
        io::ErrorKind::ConnectionRefused => Some(FailureClass::ConnectRefused),
        io::ErrorKind::AddrNotAvailable | io::ErrorKind::AddrInUse => {
            Some(FailureClass::AddrUnavailable)
        }
        io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe
        | io::ErrorKind::UnexpectedEof
        | io::ErrorKind::NotConnected => Some(FailureClass::ConnReset),
        io::ErrorKind::TimedOut => Some(timeout_class(phase)),
        io::ErrorKind::InvalidData if phase == Phase::Handshake => Some(FailureClass::TlsFailed),
        _ => None,
    }
}

/// What a timeout means in each phase.
pub fn timeout_class(phase: Phase) -> FailureClass {
    match phase {
        Phase::Connect => FailureClass::ConnectTimeout,
        Phase::Handshake => FailureClass::HandshakeTimeout,
        Phase::Request => FailureClass::RequestTimeout,
    }
}

/// The error and its sources as one line, so an example message explains itself.
pub fn error_chain_text(err: &(dyn StdError + 'static)) -> String {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(e) = cause {
        let part = e.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        cause = e.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_maps_to_exhaustion_classes() {
        let e = io::Error::from_raw_os_error(libc::EADDRNOTAVAIL);
        assert_eq!(
            classify_error(Phase::Connect, &e).class,
            FailureClass::AddrUnavailable
        );
        let e = io::Error::from_raw_os_error(libc::EMFILE);
        assert_eq!(
            classify_error(Phase::Connect, &e).class,
            FailureClass::FdExhausted
        );
        let e = io::Error::from_raw_os_error(libc::ECONNREFUSED);
        assert_eq!(
            classify_error(Phase::Connect, &e).class,
            FailureClass::ConnectRefused
        );
    }

    #[test]
    fn timeouts_depend_on_phase() {
        let e = io::Error::new(io::ErrorKind::TimedOut, "slow");
        assert_eq!(
            classify_error(Phase::Connect, &e).class,
            FailureClass::ConnectTimeout
        );
        assert_eq!(
            classify_error(Phase::Handshake, &e).class,
            FailureClass::HandshakeTimeout
        );
        assert_eq!(
            classify_error(Phase::Request, &e).class,
            FailureClass::RequestTimeout
        );
    }

    #[test]
    fn rustls_error_inside_io_error_is_tls() {
        let e = io::Error::new(
            io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        let f = classify_error(Phase::Handshake, &e);
        assert_eq!(f.class, FailureClass::TlsFailed);
        assert!(f.detail.contains("certificate"), "{}", f.detail);
    }

    #[test]
    fn nested_failure_keeps_its_class() {
        let inner = Failure::new(FailureClass::MissingData, "id mismatch");
        let e = io::Error::other(inner);
        assert_eq!(
            classify_error(Phase::Request, &e).class,
            FailureClass::MissingData
        );
    }

    #[test]
    fn unprocessed_failures_are_conn_reset_and_marked() {
        let f = Failure::unprocessed("above the GOAWAY's last stream id");
        assert_eq!(f.class, FailureClass::ConnReset);
        assert!(f.class.breaks_connection());
        assert!(f.is_unprocessed());
        assert!(f.clone().is_unprocessed());
        assert!(!Failure::new(FailureClass::ConnReset, "reset").is_unprocessed());
    }

    #[test]
    fn class_indices_are_dense_and_names_unique() {
        let mut names: Vec<_> = FailureClass::ALL.iter().map(|c| c.as_str()).collect();
        for (i, c) in FailureClass::ALL.iter().enumerate() {
            assert_eq!(c.index(), i);
        }
        names.sort();
        names.dedup();
        assert_eq!(names.len(), FailureClass::ALL.len());
    }
}
