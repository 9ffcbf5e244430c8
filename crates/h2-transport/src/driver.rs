//! The async driver of a [`proto::Connection`]: socket reads and writes, and waking the tasks
//! whose streams completed. There is no connection task: the `h2` crate's client hands every
//! request to its connection task and keeps general-purpose stream state, which cost a fifth
//! of the load generator's CPU and left it slower than h2load on the same server
//! (scripts/compare-anchors). Instead the tasks of the requests drive the connection
//! themselves, under one lock.
//!
//! Whoever polls reads the socket for everyone and wakes the streams whose answers completed;
//! the socket keeps only the last poller's waker, so a stream that leaves while it was that
//! poller wakes another waiting stream to take over.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bench_core::failure::classify_error;
use bench_core::net::{Closer, Stream};
use bench_core::{Failure, FailureClass, Phase};
use bytes::Bytes;
use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::proto::{Answer, Config, Connection, Opened, RequestHead, StreamEvent};

/// One open HTTP/2 connection; concurrent requests become concurrent streams.
pub struct H2Conn {
    driver: Mutex<Driver>,
    closer: Mutex<Option<Closer>>,
}

struct Driver {
    core: Connection,
    io: Option<Stream>,
    /// Bytes handed to TLS that may still sit in its buffer.
    needs_flush: bool,
    /// Each open stream's task, once it waits for its answer.
    wakers: Vec<(u32, Option<Waker>)>,
    /// The stream whose task the socket wakes next.
    io_waiter: Option<u32>,
    /// Requests waiting for the server's stream limit.
    openers: VecDeque<Waker>,
}

impl H2Conn {
    /// Queues the connection preface, our SETTINGS (push off, `stream_window`, our header-list
    /// limit) and the connection window increase to `connection_window`; they leave with the
    /// first request, in one write.
    pub fn open(
        stream: Stream,
        closer: Closer,
        authority: &str,
        https: bool,
        stream_window: u32,
        connection_window: u32,
    ) -> Self {
        let config = Config {
            authority: authority.to_string(),
            https,
            stream_window,
            connection_window,
        };
        H2Conn {
            driver: Mutex::new(Driver {
                core: Connection::new(config, Instant::now()),
                io: Some(stream),
                needs_flush: false,
                wakers: Vec::new(),
                io_waiter: None,
                openers: VecDeque::new(),
            }),
            closer: Mutex::new(Some(closer)),
        }
    }

    /// Sends the request (with `body` as its DATA, if any) and reads the answer to its end.
    pub async fn exchange(
        &self,
        head: &RequestHead<'_>,
        body: Option<Bytes>,
        started: Instant,
    ) -> Result<Answer, Failure> {
        let mut body = body;
        let mut guard: Option<StreamGuard<'_>> = None;
        poll_fn(|cx| {
            let mut driver = self.driver.lock().expect("connection lock");
            let id = match guard.as_ref() {
                Some(g) => g.id,
                None => match driver.core.open_stream(head, &mut body) {
                    Ok(Opened::Stream(id)) => {
                        driver.wakers.push((id, None));
                        guard = Some(StreamGuard {
                            conn: self,
                            id,
                            finished: false,
                        });
                        id
                    }
                    Ok(Opened::Wait) => {
                        driver.openers.push_back(cx.waker().clone());
                        return Poll::Pending;
                    }
                    Err(f) => return Poll::Ready(Err(f)),
                },
            };
            driver.drive(cx, id);
            match driver.core.poll_answer(id, started) {
                Some(result) => {
                    driver.stream_left(id);
                    // The stream is gone, so the guard has nothing to cancel and need not
                    // take the lock when it drops.
                    if let Some(g) = guard.as_mut() {
                        g.finished = true;
                    }
                    Poll::Ready(result)
                }
                None => {
                    driver.set_waker(id, cx.waker());
                    Poll::Pending
                }
            }
        })
        .await
    }

    /// Opens a stream for the request (with `body`, which may hold many messages, as its
    /// DATA) whose answer is read as it arrives, with [`StreamedCall::next`]. Waits while the
    /// server's stream limit is reached.
    pub async fn open_streamed(
        &self,
        head: &RequestHead<'_>,
        body: Option<Bytes>,
        started: Instant,
    ) -> Result<StreamedCall<'_>, Failure> {
        self.open_streamed_with(head, body, None, started).await
    }

    /// [`H2Conn::open_streamed`] with a generated body after `body` (a bulk upload: its pieces
    /// are taken as the windows open, so the object is never held).
    pub async fn open_streamed_with(
        &self,
        head: &RequestHead<'_>,
        body: Option<Bytes>,
        generated: Option<bench_core::bulk::Generated>,
        started: Instant,
    ) -> Result<StreamedCall<'_>, Failure> {
        let mut body = body;
        let mut generated = generated;
        let id = poll_fn(|cx| {
            let mut driver = self.driver.lock().expect("connection lock");
            match driver.core.open_streaming(head, &mut body, &mut generated) {
                Ok(Opened::Stream(id)) => {
                    driver.wakers.push((id, None));
                    Poll::Ready(Ok(id))
                }
                Ok(Opened::Wait) => {
                    driver.openers.push_back(cx.waker().clone());
                    Poll::Pending
                }
                Err(f) => Poll::Ready(Err(f)),
            }
        })
        .await?;
        Ok(StreamedCall {
            guard: StreamGuard {
                conn: self,
                id,
                finished: false,
            },
            started,
        })
    }

    /// Sends GOAWAY, closes TLS and the socket (client first), and waits (bounded) for the
    /// server's FIN.
    pub async fn close(&self) {
        let io = {
            let mut driver = self.driver.lock().expect("connection lock");
            driver.core.close();
            driver.dispatch(None);
            let tx = driver.core.take_transmit();
            driver.io.take().map(|io| (io, tx))
        };
        if let Some((mut io, tx)) = io {
            let _ = tokio::time::timeout(Duration::from_secs(1), async {
                io.write_all(&tx).await?;
                io.shutdown().await
            })
            .await;
        }
        let closer = self.closer.lock().expect("closer lock").take();
        if let Some(closer) = closer {
            closer.finish(Duration::from_secs(1)).await;
        }
    }
}

/// A request whose answer is read as it arrives. Dropped before its end, it cancels the
/// stream (RST_STREAM(CANCEL)).
pub struct StreamedCall<'a> {
    guard: StreamGuard<'a>,
    started: Instant,
}

impl StreamedCall<'_> {
    /// The answer's next body bytes (with their arrival time and the answer's status), or
    /// its end (head, trailers and timings; the stream has then left). The stream's window
    /// reopens only as data is taken here, so a reader that takes its time holds the server
    /// to one stream window (the connection's window is given back on arrival, so other
    /// streams go on). After the end, or an error, the call has nothing more.
    pub async fn next(&mut self) -> Result<StreamEvent, Failure> {
        let (conn, id, started) = (self.guard.conn, self.guard.id, self.started);
        if self.guard.finished {
            return Err(Failure::new(
                bench_core::FailureClass::Other,
                "the answer has ended",
            ));
        }
        let finished = &mut self.guard.finished;
        poll_fn(|cx| {
            let mut driver = conn.driver.lock().expect("connection lock");
            driver.drive(cx, id);
            match driver.core.poll_stream(id, started) {
                Some(Ok(event @ StreamEvent::Data { .. })) => {
                    // The window update that taking the data may have queued goes out now.
                    driver.flush(cx, id);
                    // The reader may take its time before it asks again: the socket must not
                    // wait for it, so another waiting stream reads it meanwhile; and its own
                    // waker, stale until it asks again, is not the one another hands over to.
                    driver.hand_over_io(id);
                    if let Some((_, slot)) = driver.wakers.iter_mut().find(|(i, _)| *i == id) {
                        *slot = None;
                    }
                    Poll::Ready(Ok(event))
                }
                Some(done) => {
                    driver.stream_left(id);
                    *finished = true;
                    Poll::Ready(done)
                }
                None => {
                    driver.set_waker(id, cx.waker());
                    Poll::Pending
                }
            }
        })
        .await
    }
}

/// Cancels a stream whose request was abandoned (a timeout dropped it): RST_STREAM(CANCEL),
/// and its slot freed for the other workers. A finished stream's guard does nothing.
struct StreamGuard<'a> {
    conn: &'a H2Conn,
    id: u32,
    finished: bool,
}

impl Drop for StreamGuard<'_> {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let mut driver = self.conn.driver.lock().expect("connection lock");
        driver.core.cancel(self.id);
        driver.stream_left(self.id);
    }
}

impl Driver {
    /// Writes what is queued and reads what has arrived, until the socket would block; then
    /// wakes the streams that completed (but `me`, which is being polled).
    fn drive(&mut self, cx: &mut Context<'_>, me: u32) {
        if let Some(deadline) = self.core.timeout() {
            let now = Instant::now();
            if now >= deadline {
                self.core.handle_timeout(now);
            }
        }
        self.flush(cx, me);
        while !self.core.is_broken() {
            let Some(io) = self.io.as_mut() else {
                break;
            };
            match tokio_util::io::poll_read_buf(Pin::new(io), cx, self.core.recv_buf()) {
                Poll::Pending => {
                    self.io_waiter = Some(me);
                    break;
                }
                Poll::Ready(Ok(0)) => self.core.transport_failed(Failure::new(
                    FailureClass::ConnReset,
                    "connection closed by the server",
                )),
                Poll::Ready(Ok(_)) => self.core.received(Instant::now()),
                Poll::Ready(Err(e)) => self
                    .core
                    .transport_failed(classify_error(Phase::Request, &e)),
            }
        }
        // Acknowledgements, window updates and error frames the frames asked for.
        if !self.core.transmit().is_empty() {
            self.flush(cx, me);
        }
        self.dispatch(Some(me));
    }

    fn flush(&mut self, cx: &mut Context<'_>, me: u32) {
        let Some(io) = self.io.as_mut() else {
            return;
        };
        while !self.core.transmit().is_empty() {
            match Pin::new(&mut *io).poll_write(cx, self.core.transmit()) {
                Poll::Ready(Ok(0)) => {
                    return self.write_failed(Failure::new(
                        FailureClass::ConnReset,
                        "socket wrote nothing",
                    ))
                }
                Poll::Ready(Ok(n)) => {
                    self.core.advance_transmit(n);
                    self.needs_flush = true;
                }
                Poll::Ready(Err(e)) => {
                    return self.write_failed(classify_error(Phase::Request, &e))
                }
                Poll::Pending => {
                    self.io_waiter = Some(me);
                    return;
                }
            }
        }
        if self.needs_flush {
            match Pin::new(&mut *io).poll_flush(cx) {
                Poll::Ready(Ok(())) => self.needs_flush = false,
                Poll::Ready(Err(e)) => self.write_failed(classify_error(Phase::Request, &e)),
                Poll::Pending => self.io_waiter = Some(me),
            }
        }
    }

    /// A failed write ends the connection; nothing more can be written to it.
    fn write_failed(&mut self, failure: Failure) {
        self.core.transport_failed(failure);
        let _ = self.core.take_transmit();
    }

    /// Wakes the tasks of completed streams (but `me`) and of requests that may now open a
    /// stream.
    fn dispatch(&mut self, me: Option<u32>) {
        let wakers = &mut self.wakers;
        self.core.drain_completed(|id| {
            if Some(id) == me {
                return;
            }
            if let Some((_, waker)) = wakers.iter_mut().find(|(i, _)| *i == id) {
                if let Some(w) = waker.take() {
                    w.wake();
                }
            }
        });
        let wakes = self.core.take_opener_wakes();
        for _ in 0..wakes.min(self.openers.len()) {
            if let Some(w) = self.openers.pop_front() {
                w.wake();
            }
        }
    }

    fn set_waker(&mut self, id: u32, waker: &Waker) {
        if let Some((_, slot)) = self.wakers.iter_mut().find(|(i, _)| *i == id) {
            match slot {
                Some(w) if w.will_wake(waker) => {}
                _ => *slot = Some(waker.clone()),
            }
        }
    }

    /// A stream left: waiting requests may open one, and if the socket would have woken the
    /// stream that left, another waiting stream takes over reading and writing.
    fn stream_left(&mut self, id: u32) {
        if let Some(index) = self.wakers.iter().position(|(i, _)| *i == id) {
            self.wakers.swap_remove(index);
        }
        self.dispatch(Some(id));
        self.hand_over_io(id);
    }

    /// If the socket would wake stream `id` (which is not waiting now), another waiting
    /// stream takes over reading and writing.
    fn hand_over_io(&mut self, id: u32) {
        if self.io_waiter == Some(id) {
            self.io_waiter = None;
            let waiting = self.wakers.iter().filter(|(i, _)| *i != id);
            if let Some(w) = waiting.into_iter().find_map(|(_, w)| w.as_ref()) {
                w.wake_by_ref();
            }
        }
    }
}
