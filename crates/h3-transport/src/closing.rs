//! A client endpoint's closing period (RFC 9000 §10.2.1), held with the state the RFC asks
//! for instead of all of quinn's.
//!
//! After the client closes, quinn keeps its whole endpoint (a 47 KB receive buffer: 32 ×
//! 1,472 B) and connection (packet spaces, TLS session, streams, send buffer) alive for the
//! closing period, three probe timeouts, only so that it can answer a late packet from the
//! server with CONNECTION_CLOSE. The client has one endpoint per connection, and under load the
//! probe timeout grows with the queueing in the RTT estimate, so the closing endpoints
//! outnumbered the open ones about 3 : 1 in a new-conn run at 500 workers and held most of the
//! load generator's memory.
//!
//! RFC 9000 §10.2.1 lets a closing endpoint keep only what identifies the connection's packets
//! and the packet that carries CONNECTION_CLOSE, and resend that same packet in response to
//! what arrives. Here the connection's own connected socket identifies its packets. So once
//! quinn has sent its CONNECTION_CLOSE and set its closing timer, [`CloseWatch`] has recorded
//! both, quinn's endpoint and connection drivers are stopped (dropping their state), and
//! [`Closed::hold`] keeps the socket open until quinn's own deadline, answering what arrives.
//! Anything unusual on the way (the server closed first, the close not seen going out within
//! a bound) leaves the closing to quinn, as before.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// What a client endpoint's closing needs from quinn, recorded as quinn closes: the datagrams
/// the endpoint's socket sends, the timer deadlines its connection sets, and its driver tasks.
#[derive(Debug, Default)]
pub(crate) struct CloseWatch {
    /// The thread about to close the connection, set just before it does.
    closing_thread: Mutex<Option<std::thread::ThreadId>>,
    armed: AtomicBool,
    /// Set inside quinn's close, under the connection's lock (see [`CloseWatch::start`]); from
    /// then on datagrams and deadlines are kept.
    recording: AtomicBool,
    /// Datagrams sent on the socket so far (all of them, recording or not).
    sent: AtomicU64,
    recorded: Mutex<Recorded>,
    /// Woken whenever something is recorded.
    progress: tokio::sync::Notify,
    /// The endpoint's and the connection's driver tasks (quinn spawns nothing else).
    drivers: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

#[derive(Debug, Default)]
struct Recorded {
    /// The last datagram sent while recording.
    datagram: Option<Vec<u8>>,
    /// The last timer deadline set while recording.
    deadline: Option<Instant>,
}

/// A connection's CONNECTION_CLOSE and the end of its closing period, as quinn set them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Closed {
    pub datagram: Vec<u8>,
    pub until: Instant,
}

impl CloseWatch {
    /// Called by the thread that is about to close the connection. quinn's close reads the
    /// clock (the runtime's `now`) under the connection's lock; on this thread that is the
    /// first reading from here on, and recording starts there. So everything recorded comes
    /// after the close in the lock's order, and nothing from a driver turn before it (one
    /// running on another thread now, say).
    pub(crate) fn start(&self) {
        *self.closing_thread.lock().expect("close watch") = Some(std::thread::current().id());
        self.armed.store(true, Ordering::SeqCst);
    }

    /// The runtime's clock was read.
    fn clock_read(&self) {
        if self.armed.load(Ordering::Relaxed) {
            let mut thread = self.closing_thread.lock().expect("close watch");
            if *thread == Some(std::thread::current().id()) {
                *thread = None;
                self.armed.store(false, Ordering::SeqCst);
                self.recording.store(true, Ordering::SeqCst);
            }
        }
    }

    /// The socket sent `datagrams` datagrams, the last of them `last`.
    pub(crate) fn sent(&self, datagrams: u64, last: &[u8]) {
        self.sent.fetch_add(datagrams, Ordering::SeqCst);
        if self.recording.load(Ordering::Relaxed) {
            let mut recorded = self.recorded.lock().expect("close watch");
            let datagram = recorded.datagram.get_or_insert_with(Vec::new);
            datagram.clear();
            datagram.extend_from_slice(last);
            drop(recorded);
            self.progress.notify_one();
        }
    }

    fn timer_set(&self, at: Instant) {
        if self.recording.load(Ordering::Relaxed) {
            let mut recorded = self.recorded.lock().expect("close watch");
            recorded.deadline = Some(at);
            drop(recorded);
            self.progress.notify_one();
        }
    }

    /// What quinn closed `conn` with, once it has sent it: recording started inside the close,
    /// so every datagram recorded is a CONNECTION_CLOSE, and every deadline recorded is the
    /// closing timer's (quinn's close stops the other timers, and its driver arms this one in
    /// the turn that sends the close). quinn's connection lock orders this check after that
    /// whole turn; once all the datagrams quinn produced are sent (none is held back by a
    /// full socket) the last one sent is the close. `None` if that is not seen within `bound`.
    pub(crate) async fn closed(&self, conn: &quinn::Connection, bound: Duration) -> Option<Closed> {
        let wait = async {
            loop {
                let progress = self.progress.notified();
                let produced = conn.stats().udp_tx.datagrams;
                if produced == self.sent.load(Ordering::SeqCst) {
                    let recorded = self.recorded.lock().expect("close watch");
                    if let (Some(datagram), Some(until)) = (&recorded.datagram, recorded.deadline) {
                        return Closed {
                            datagram: datagram.clone(),
                            until,
                        };
                    }
                }
                progress.await;
            }
        };
        tokio::time::timeout(bound, wait).await.ok()
    }

    /// Aborts quinn's driver tasks of this endpoint: from here on they are never polled again,
    /// and the runtime drops them (and their hold on the endpoint's and connection's state)
    /// the next time it gets to them. Awaiting the handles returned says when that is done.
    pub(crate) fn abort_drivers(&self) -> Vec<tokio::task::JoinHandle<()>> {
        let drivers = std::mem::take(&mut *self.drivers.lock().expect("drivers"));
        for driver in &drivers {
            driver.abort();
        }
        drivers
    }
}

/// What the closing period needs of the connection's socket (the client's is
/// [`crate::udp::RefusalAwareSocket`]).
pub(crate) trait ClosingSocket {
    /// Waits for the next datagram and drops it.
    async fn recv_discard(&self) -> std::io::Result<()>;
    /// Sends one datagram as it is, if the socket can take it now.
    fn send_raw(&self, datagram: &[u8]) -> std::io::Result<()>;
}

impl Closed {
    /// The closing period on the connection's socket: every datagram that arrives is answered
    /// with the CONNECTION_CLOSE, the 1st, 2nd, 4th, 8th … of them (RFC 9000 §10.2.1 asks for
    /// a limited rate), until the deadline quinn set.
    pub(crate) async fn hold(&self, socket: &impl ClosingSocket) {
        let end = tokio::time::sleep_until(self.until.into());
        tokio::pin!(end);
        let mut received: u64 = 0;
        loop {
            tokio::select! {
                _ = &mut end => return,
                got = socket.recv_discard() => {
                    if got.is_ok() {
                        received += 1;
                        if received.is_power_of_two() {
                            let _ = socket.send_raw(&self.datagram);
                        }
                    }
                }
            }
        }
    }
}

/// quinn's tokio runtime, recording the endpoint's driver tasks and timer deadlines.
#[derive(Debug)]
pub(crate) struct WatchedRuntime(pub(crate) Arc<CloseWatch>);

impl quinn::Runtime for WatchedRuntime {
    fn new_timer(&self, at: Instant) -> Pin<Box<dyn quinn::AsyncTimer>> {
        self.0.timer_set(at);
        Box::pin(WatchedTimer {
            sleep: Box::pin(tokio::time::sleep_until(at.into())),
            watch: self.0.clone(),
        })
    }

    fn spawn(&self, future: Pin<Box<dyn Future<Output = ()> + Send>>) {
        let task = tokio::spawn(future);
        self.0.drivers.lock().expect("drivers").push(task);
    }

    fn wrap_udp_socket(
        &self,
        socket: std::net::UdpSocket,
    ) -> io::Result<Arc<dyn quinn::AsyncUdpSocket>> {
        quinn::Runtime::wrap_udp_socket(&quinn::TokioRuntime, socket)
    }

    fn now(&self) -> Instant {
        self.0.clock_read();
        quinn::Runtime::now(&quinn::TokioRuntime)
    }
}

#[derive(Debug)]
struct WatchedTimer {
    sleep: Pin<Box<tokio::time::Sleep>>,
    watch: Arc<CloseWatch>,
}

impl quinn::AsyncTimer for WatchedTimer {
    fn reset(self: Pin<&mut Self>, at: Instant) {
        let this = self.get_mut();
        this.watch.timer_set(at);
        this.sleep.as_mut().reset(at.into());
    }

    fn poll(self: Pin<&mut Self>, cx: &mut Context) -> Poll<()> {
        Future::poll(self.get_mut().sleep.as_mut(), cx)
    }
}
