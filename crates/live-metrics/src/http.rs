//! The endpoint: a tokio listener answering `GET /metrics` with the board's exposition, one
//! request per connection (`Connection: close`), written by hand: a request head of at most
//! 8 KiB read within 10 s, `GET` or `HEAD`, nothing else.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};

use crate::board::Board;
use crate::text::CONTENT_TYPE;

/// The largest request head read.
const MAX_HEAD: usize = 8 * 1024;
/// How long a client gets to send its request head.
const HEAD_BOUND: Duration = Duration::from_secs(10);
/// Connections served at once; more wait to be accepted.
const MAX_CONNECTIONS: usize = 16;

/// Accepts and serves connections until the task is dropped. `final_served` is set once a
/// final exposition ([`Board::render`]) has been written whole.
pub async fn serve(listener: TcpListener, board: Arc<Board>, final_served: watch::Sender<bool>) {
    let final_served = Arc::new(final_served);
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
        let Ok((stream, _)) = listener.accept().await else {
            // Out of descriptors, or the like: try again shortly rather than spin.
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let (board, final_served) = (board.clone(), final_served.clone());
        tokio::spawn(async move {
            if let Ok(true) = answer(stream, &board).await {
                final_served.send_replace(true);
            }
            drop(permit);
        });
    }
}

/// Answers one request; `Ok(true)` when it wrote a final exposition whole.
async fn answer(mut stream: TcpStream, board: &Board) -> std::io::Result<bool> {
    let _ = stream.set_nodelay(true);
    let head = match tokio::time::timeout(HEAD_BOUND, read_head(&mut stream)).await {
        Ok(Ok(Some(head))) => head,
        // Silent, too slow, too long or not HTTP: closed without an answer.
        _ => return Ok(false),
    };
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut request = httparse::Request::new(&mut headers);
    let (method, path) = match request.parse(&head) {
        Ok(httparse::Status::Complete(_)) => (
            request.method.unwrap_or_default().to_string(),
            request.path.unwrap_or_default().to_string(),
        ),
        _ => {
            respond(
                &mut stream,
                "400 Bad Request",
                "text/plain",
                b"bad request\n",
                true,
            )
            .await?;
            return Ok(false);
        }
    };
    let path = path.split('?').next().unwrap_or_default();
    let body_too = method != "HEAD";
    match (method.as_str(), path) {
        ("GET" | "HEAD", "/metrics") => {
            let (text, last) = board.render();
            respond(
                &mut stream,
                "200 OK",
                CONTENT_TYPE,
                text.as_bytes(),
                body_too,
            )
            .await?;
            Ok(last && body_too)
        }
        ("GET" | "HEAD", "/") => {
            let page = b"tbench runner: live metrics at /metrics\n";
            respond(
                &mut stream,
                "200 OK",
                "text/plain; charset=utf-8",
                page,
                body_too,
            )
            .await?;
            Ok(false)
        }
        ("GET" | "HEAD", _) => {
            respond(
                &mut stream,
                "404 Not Found",
                "text/plain",
                b"not found\n",
                body_too,
            )
            .await?;
            Ok(false)
        }
        _ => {
            respond(
                &mut stream,
                "405 Method Not Allowed\r\nAllow: GET, HEAD",
                "text/plain",
                b"method not allowed\n",
                true,
            )
            .await?;
            Ok(false)
        }
    }
}

/// Reads up to the end of the request head; `None` when the peer closed first or the head is
/// longer than [`MAX_HEAD`].
async fn read_head(stream: &mut TcpStream) -> std::io::Result<Option<Vec<u8>>> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(None);
        }
        head.extend_from_slice(&buf[..n]);
        if head.windows(4).any(|w| w == b"\r\n\r\n") {
            return Ok(Some(head));
        }
        if head.len() > MAX_HEAD {
            return Ok(None);
        }
    }
}

async fn respond(
    stream: &mut TcpStream,
    status: &str,
    content_type: &str,
    body: &[u8],
    body_too: bool,
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut out = head.into_bytes();
    if body_too {
        out.extend_from_slice(body);
    }
    stream.write_all(&out).await?;
    stream.shutdown().await
}
