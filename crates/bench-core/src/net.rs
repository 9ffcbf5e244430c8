//! TCP plumbing shared by the TCP stacks: timed connect + TLS handshake, a byte-counting
//! stream wrapper (wire bytes incl. TLS records and HTTP/2 framing), and the accept loop.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
pub use tokio_rustls::TlsAcceptor;
use tokio_rustls::TlsConnector;

use crate::failure::{classify_error, timeout_class, Failure, Phase};
use crate::reply::ConnectTiming;
use crate::source::{bind_tcp_source, SourceAddresses};
use crate::stack::{ClientSettings, ServerSettings, WireBytes};

/// Byte counters of one connection, shared between the stream and its owner.
#[derive(Debug, Default)]
pub struct WireCounters {
    sent: AtomicU64,
    received: AtomicU64,
}

impl WireCounters {
    pub fn snapshot(&self) -> WireBytes {
        WireBytes {
            sent: self.sent.load(Ordering::Relaxed),
            received: self.received.load(Ordering::Relaxed),
        }
    }
}

/// A stream that counts the bytes passing through it at the socket.
#[derive(Debug)]
pub struct Counted<S> {
    inner: S,
    counters: Arc<WireCounters>,
}

impl<S> Counted<S> {
    pub fn new(inner: S) -> Self {
        Counted {
            inner,
            counters: Arc::default(),
        }
    }
    pub fn counters(&self) -> Arc<WireCounters> {
        self.counters.clone()
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let res = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = (buf.filled().len() - before) as u64;
        self.counters.received.fetch_add(n, Ordering::Relaxed);
        res
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let res = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = res {
            self.counters.sent.fetch_add(n as u64, Ordering::Relaxed);
        }
        res
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let res = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = res {
            self.counters.sent.fetch_add(n as u64, Ordering::Relaxed);
        }
        res
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The socket under a TLS 1.3 client: sends the handshake's last flight (the client's
/// Finished) in the same TCP segment as the first bytes written after the handshake, the
/// first request, instead of in a segment of its own.
///
/// Why: a server that sees the Finished alone answers it at once with its session tickets;
/// the request, arriving a moment later in its own segment, is then answered while those
/// tickets are still unacknowledged, and a server socket with Nagle on (Node's TLS servers,
/// for one) holds that answer until the client's delayed ACK fires, 40 ms later on Linux.
/// With the Finished and the request in one segment, the server reads both at once and
/// answers tickets and response together. curl shows the same stall on such a server;
/// `hey -disable-keepalive` does not only because its `Connection: close` makes the server
/// send its FIN with the answer, which Nagle never holds.
///
/// How: once the server's first flight has been read, the first write that carries an encrypted
/// record (content type 23: in TLS 1.3 the client's last flight, its Finished; the plaintext
/// ChangeCipherSpec may come first) goes into a corked socket (TCP_CORK), and the socket is
/// uncorked right after
/// the next write (the request, now in the same segment), a read that returns anything, or a
/// shutdown, whichever comes first. A read that finds nothing does not uncork (a client
/// checks for a close before its first request); the kernel sends corked bytes after 200 ms
/// anyway, so a connection opened ahead of its first request (a pool) or a client that waits
/// for the server to speak first still completes its handshake, that much later. After that
/// the socket is a plain TCP stream.
/// The handshake's time ends when the Finished is written (to the corked socket), as before.
/// After a HelloRetryRequest the second ClientHello (a plaintext handshake record) goes at once:
/// the client then waits for the server, which waits for it, so a held hello would stall the
/// handshake until the cork expired; the Finished that follows is held as in any handshake.
#[derive(Debug)]
pub struct LastFlight {
    tcp: TcpStream,
    state: Flight,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flight {
    /// Handshake in progress; `heard` once the server has sent anything.
    Handshake { heard: bool },
    /// The client's last flight waits in the corked socket for the next write.
    Corked,
    /// A plain TCP stream from here on.
    Open,
}

impl LastFlight {
    pub fn new(tcp: TcpStream) -> Self {
        LastFlight {
            tcp,
            state: Flight::Handshake { heard: false },
        }
    }

    /// Whether the client's last flight is being held for the next write.
    pub fn holding(&self) -> bool {
        self.state == Flight::Corked
    }

    /// Before a write: corks the socket if this write is the client's last flight, the first
    /// after the server spoke that carries an encrypted record.
    fn before_write(&mut self, bufs: &[&[u8]]) {
        if self.state == (Flight::Handshake { heard: true }) && carries_encrypted_record(bufs) {
            // Without the cork (an error) the flight simply goes at once, as it used to.
            self.state = if set_cork(&self.tcp, true) {
                Flight::Corked
            } else {
                Flight::Open
            };
        }
    }

    /// After a write the cork was not set for: sends the held flight with it.
    fn uncork(&mut self) {
        if self.state == Flight::Corked {
            set_cork(&self.tcp, false);
        }
        self.state = Flight::Open;
    }

    /// After a write returned `res`: a write into a corked socket that was not the last
    /// flight itself uncorks it.
    fn after_write(&mut self, was: Flight, res: &Poll<io::Result<usize>>) {
        if was == Flight::Corked && matches!(res, Poll::Ready(_)) {
            self.uncork();
        }
    }
}

/// Whether the TLS records written (`bufs`, in order, starting at a record's header) include an
/// encrypted one (content type 23, application data: all of TLS 1.3's records after the
/// hellos, the Finished first). The hellos and the ChangeCipherSpec are plaintext (22, 20).
fn carries_encrypted_record(bufs: &[&[u8]]) -> bool {
    const APPLICATION_DATA: u8 = 23;
    let total: usize = bufs.iter().map(|b| b.len()).sum();
    let byte_at = |mut at: usize| -> Option<u8> {
        for b in bufs {
            if at < b.len() {
                return Some(b[at]);
            }
            at -= b.len();
        }
        None
    };
    let mut at = 0usize;
    while at < total {
        let Some(kind) = byte_at(at) else { break };
        if kind == APPLICATION_DATA {
            return true;
        }
        let (Some(hi), Some(lo)) = (byte_at(at + 3), byte_at(at + 4)) else {
            break;
        };
        at += 5 + usize::from(u16::from_be_bytes([hi, lo]));
    }
    false
}

/// Sets or clears TCP_CORK; false if that failed (or on a system without it).
fn set_cork(tcp: &TcpStream, on: bool) -> bool {
    #[cfg(target_os = "linux")]
    {
        socket2::SockRef::from(tcp).set_tcp_cork(on).is_ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (tcp, on);
        false
    }
}

impl AsyncRead for LastFlight {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let res = Pin::new(&mut self.tcp).poll_read(cx, buf);
        match self.state {
            Flight::Handshake { heard: false } if buf.filled().len() > before => {
                self.state = Flight::Handshake { heard: true };
            }
            // A read that waits keeps the flight held: clients look for a close before their
            // first request (one poll), and the server, still waiting for our Finished, has
            // nothing to say. Anything it does say (data, its close, an error) ends the wait.
            Flight::Corked if res.is_ready() => self.uncork(),
            _ => {}
        }
        res
    }
}

impl AsyncWrite for LastFlight {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let was = self.state;
        self.before_write(&[buf]);
        let res = Pin::new(&mut self.tcp).poll_write(cx, buf);
        self.after_write(was, &res);
        res
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let was = self.state;
        if self.state == (Flight::Handshake { heard: true }) {
            let slices: Vec<&[u8]> = bufs.iter().map(|b| &b[..]).collect();
            self.before_write(&slices);
        }
        let res = Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs);
        self.after_write(was, &res);
        res
    }
    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Not an uncork: the handshake flushes right after writing its last flight.
        Pin::new(&mut self.tcp).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.uncork();
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

/// A TCP stream, plaintext or TLS (client or server side), behind one type.
pub enum Stream {
    Plain(Counted<TcpStream>),
    TlsClient(Box<tokio_rustls::client::TlsStream<Counted<LastFlight>>>),
    TlsServer(Box<tokio_rustls::server::TlsStream<Counted<TcpStream>>>),
}

impl Stream {
    /// The counters of the underlying socket.
    pub fn counters(&self) -> Arc<WireCounters> {
        match self {
            Stream::Plain(s) => s.counters(),
            Stream::TlsClient(s) => s.get_ref().0.counters(),
            Stream::TlsServer(s) => s.get_ref().0.counters(),
        }
    }

    /// The ALPN protocol the TLS handshake settled on, if any.
    pub fn alpn(&self) -> Option<&[u8]> {
        match self {
            Stream::Plain(_) => None,
            Stream::TlsClient(s) => s.get_ref().1.alpn_protocol(),
            Stream::TlsServer(s) => s.get_ref().1.alpn_protocol(),
        }
    }
}

macro_rules! delegate {
    ($self:ident, $s:ident => $e:expr) => {
        match $self.get_mut() {
            Stream::Plain($s) => {
                let $s = Pin::new($s);
                $e
            }
            Stream::TlsClient($s) => {
                let $s = Pin::new(&mut **$s);
                $e
            }
            Stream::TlsServer($s) => {
                let $s = Pin::new(&mut **$s);
                $e
            }
        }
    };
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        delegate!(self, s => s.poll_read(cx, buf))
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        delegate!(self, s => s.poll_write(cx, buf))
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        delegate!(self, s => s.poll_write_vectored(cx, bufs))
    }
    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::TlsClient(s) => s.is_write_vectored(),
            Stream::TlsServer(s) => s.is_write_vectored(),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        delegate!(self, s => s.poll_flush(cx))
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        delegate!(self, s => s.poll_shutdown(cx))
    }
}

/// Client-side TLS setup for a TCP stack, prepared once and used for every connection.
#[derive(Clone)]
pub struct TcpConnector {
    target: SocketAddr,
    tls: Option<(TlsConnector, rustls_pki_types::ServerName<'static>)>,
    connect_timeout: Duration,
    handshake_timeout: Duration,
    linger_zero: bool,
    /// Shared by the clones of this connector, so that every worker's connects take the
    /// source addresses in one round-robin.
    sources: Arc<SourceAddresses>,
}

impl TcpConnector {
    /// Builds the connector for a stack with the given ALPN (`settings.tls == None` → plaintext).
    pub fn new(settings: &ClientSettings, alpn: &[u8]) -> anyhow::Result<Self> {
        let tls = match &settings.tls {
            None => None,
            Some(tls) => {
                let config = crate::tls::client_config(tls, alpn)?;
                let name = rustls_pki_types::ServerName::try_from(settings.server_name.clone())?;
                Some((TlsConnector::from(config), name))
            }
        };
        Ok(TcpConnector {
            target: settings.target,
            tls,
            connect_timeout: settings.connect_timeout,
            handshake_timeout: settings.handshake_timeout,
            linger_zero: settings.tuning.linger_zero,
            sources: Arc::new(SourceAddresses::new(
                settings.target,
                settings.tuning.source_addresses,
            )),
        })
    }

    /// Opens a new socket and, with TLS, completes a handshake; each phase timed on its own.
    pub async fn connect(&self) -> Result<(Stream, ConnectTiming, Closer), Failure> {
        let started = Instant::now();
        let tcp = tokio::time::timeout(
            self.connect_timeout,
            open_tcp(self.target, self.sources.next(), self.linger_zero),
        )
        .await
        .map_err(|_| Failure::new(timeout_class(Phase::Connect), "TCP connect timed out"))?
        .map_err(|e| classify_error(Phase::Connect, &e))?;
        let tcp_connect = started.elapsed();
        let closer = Closer::new(&tcp, self.linger_zero);
        let Some((connector, name)) = &self.tls else {
            let timing = ConnectTiming {
                tcp_connect,
                handshake: Duration::ZERO,
                resumed: false,
            };
            return Ok((Stream::Plain(Counted::new(tcp)), timing, closer));
        };
        let counted = Counted::new(LastFlight::new(tcp));
        let hs_started = Instant::now();
        let tls = tokio::time::timeout(
            self.handshake_timeout,
            connector.connect(name.clone(), counted),
        )
        .await
        .map_err(|_| Failure::new(timeout_class(Phase::Handshake), "TLS handshake timed out"))?
        .map_err(|e| classify_error(Phase::Handshake, &e))?;
        let handshake = hs_started.elapsed();
        let resumed = tls.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
        let timing = ConnectTiming {
            tcp_connect,
            handshake,
            resumed,
        };
        Ok((Stream::TlsClient(Box::new(tls)), timing, closer))
    }
}

/// Ends a client TCP connection the same way every time, whatever the protocol library does
/// with its socket: the client sends its FIN first, waits (bounded) for the server's, and
/// discards anything unread, so the client's port ends in TIME_WAIT, as the study's clients'
/// did. Closing with unread bytes (a late session ticket, a close_notify) would otherwise
/// turn the close into an RST at random and leave no TIME_WAIT. With `linger_zero` the close
/// is an RST on purpose.
pub struct Closer {
    /// A second descriptor of the socket, kept after the library drops its own.
    socket: Option<std::net::TcpStream>,
}

impl Closer {
    fn new(tcp: &TcpStream, linger_zero: bool) -> Self {
        use std::os::fd::AsFd;
        let socket = if linger_zero {
            None
        } else {
            tcp.as_fd()
                .try_clone_to_owned()
                .ok()
                .map(std::net::TcpStream::from)
        };
        Closer { socket }
    }

    /// Sends FIN if the library has not, then reads to the server's FIN (at most `within`).
    pub async fn finish(self, within: Duration) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let Some(socket) = self.socket else {
            return;
        };
        let Ok(mut tcp) = TcpStream::from_std(socket) else {
            return;
        };
        let _ = tcp.shutdown().await;
        let mut sink = [0u8; 4096];
        let _ = tokio::time::timeout(within, async {
            while let Ok(n) = tcp.read(&mut sink).await {
                if n == 0 {
                    break;
                }
            }
        })
        .await;
    }
}

/// A new TCP socket to `addr` with TCP_NODELAY (Nagle + delayed ACK add 40 ms tails otherwise).
/// With `linger_zero` the close is an RST and leaves no TIME_WAIT behind. With a `source` the
/// socket is bound to that address first (see [`crate::source`]).
async fn open_tcp(
    addr: SocketAddr,
    source: Option<std::net::IpAddr>,
    linger_zero: bool,
) -> io::Result<TcpStream> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_nodelay(true)?;
    if linger_zero {
        socket.set_zero_linger()?;
    }
    if let Some(source) = source {
        bind_tcp_source(&socket, source)?;
    }
    socket.connect(addr).await
}

/// Binds a TCP listener with an explicit accept backlog (a collapse knob in the study).
pub fn bind_tcp(addr: SocketAddr, backlog: u32) -> io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(backlog)
}

/// The TLS acceptor for a stack's ALPN, or `None` when the settings ask for plaintext.
pub fn tls_acceptor(settings: &ServerSettings, alpn: &[u8]) -> anyhow::Result<Option<TlsAcceptor>> {
    settings
        .tls
        .as_ref()
        .map(|id| {
            let tickets = !settings.tuning.no_session_tickets;
            Ok(crate::tls::server_config(id, alpn, tickets)?.into())
        })
        .transpose()
}

/// Accepts connections forever; each one gets its own task that does the TLS handshake (so a
/// slow handshake never blocks accepting) and then runs `handle`.
pub async fn serve_tcp<F, Fut>(listener: TcpListener, tls: Option<TlsAcceptor>, handle: F)
where
    F: Fn(Stream) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let handle = Arc::new(handle);
    loop {
        let tcp = match listener.accept().await {
            Ok((tcp, _)) => tcp,
            Err(_) => {
                // EMFILE and friends: back off instead of spinning or dying.
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let handle = handle.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let counted = Counted::new(tcp);
            let stream = match tls {
                None => Stream::Plain(counted),
                Some(acceptor) => {
                    match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(counted))
                        .await
                    {
                        Ok(Ok(s)) => Stream::TlsServer(Box::new(s)),
                        _ => return,
                    }
                }
            };
            handle(stream).await;
        });
    }
}

/// The task that drives a client connection (e.g. quinn's endpoint). Closing awaits it
/// (bounded), so the socket is really closed before a worker opens the next one; dropping the
/// connection without closing aborts it.
pub struct ConnDriver {
    task: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl ConnDriver {
    pub fn spawn<F>(driver: F) -> Self
    where
        F: std::future::Future + Send + 'static,
    {
        ConnDriver {
            task: std::sync::Mutex::new(Some(tokio::spawn(async move {
                let _ = driver.await;
            }))),
        }
    }

    /// Waits up to `within` for the driver to finish, then abandons it.
    pub async fn finish(&self, within: Duration) {
        let handle = self.task.lock().expect("driver lock").take();
        if let Some(handle) = handle {
            let abort = handle.abort_handle();
            if tokio::time::timeout(within, handle).await.is_err() {
                abort.abort();
            }
        }
    }
}

impl Drop for ConnDriver {
    fn drop(&mut self) {
        if let Ok(mut handle) = self.task.lock() {
            if let Some(handle) = handle.take() {
                handle.abort();
            }
        }
    }
}

/// Binds a TCP listener for `settings` and returns a server that runs `handle` on every
/// accepted stream, after the TLS handshake for `alpn` unless the settings ask for plaintext.
pub fn tcp_server<F, Fut>(
    settings: &ServerSettings,
    alpn: &[u8],
    handle: F,
) -> anyhow::Result<crate::stack::BoundServer>
where
    F: Fn(Stream) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    use futures::FutureExt;
    let listener = bind_tcp(settings.listen, settings.backlog)?;
    let local_addr = listener.local_addr()?;
    let tls = tls_acceptor(settings, alpn)?;
    let serving = async move {
        serve_tcp(listener, tls, handle).await;
        Ok(())
    }
    .boxed();
    Ok(crate::stack::BoundServer {
        local_addr,
        serving,
    })
}
