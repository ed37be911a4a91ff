//! Just enough HTTP/1.1 for etcd's JSON gateway (`/v3/...`): one POST per connection, answers
//! read whole (bounded) or, for a watch, as a stream of newline-separated JSON messages.
//! Everything read is bounded in size and time.

use crate::Error;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Largest answer or watch message accepted (a module's rows are far smaller).
pub(crate) const MAX_BODY: usize = 32 << 20;
/// Largest status line or header line.
const MAX_LINE: usize = 8 * 1024;

fn malformed(endpoint: &str, why: impl Into<String>) -> Error {
    Error::Malformed {
        endpoint: endpoint.to_string(),
        why: why.into(),
    }
}

/// An answer being read: the connection after the status line and headers.
pub(crate) struct Answer {
    endpoint: String,
    reader: BufReader<TcpStream>,
    chunked: bool,
    length: Option<usize>,
    /// Bytes of a message not yet ended by a newline (streams).
    pending: Vec<u8>,
    finished: bool,
}

/// Sends `POST path` with a JSON `body` to `endpoint` (`host:port`) and reads the status line
/// and headers within `timeout`.
pub(crate) async fn post(
    endpoint: &str,
    path: &str,
    body: &[u8],
    timeout: Duration,
) -> Result<Answer, Error> {
    let attempt = async {
        let mut tcp = TcpStream::connect(endpoint)
            .await
            .map_err(|e| Error::Unreachable(format!("{endpoint}: {e}")))?;
        let _ = tcp.set_nodelay(true);
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {endpoint}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        tcp.write_all(head.as_bytes())
            .await
            .and(tcp.write_all(body).await)
            .map_err(|e| Error::Unreachable(format!("{endpoint}: {e}")))?;
        let mut reader = BufReader::new(tcp);
        let status_line = read_line(&mut reader, endpoint).await?;
        let status: u16 = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| malformed(endpoint, format!("status line {status_line:?}")))?;
        let (mut chunked, mut length) = (false, None);
        loop {
            let line = read_line(&mut reader, endpoint).await?;
            if line.is_empty() {
                break;
            }
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
            if name == "transfer-encoding" && value.eq_ignore_ascii_case("chunked") {
                chunked = true;
            } else if name == "content-length" {
                length = value.parse().ok();
            }
        }
        let mut answer = Answer {
            endpoint: endpoint.to_string(),
            reader,
            chunked,
            length,
            pending: Vec::new(),
            finished: false,
        };
        if status != 200 {
            let body = answer.whole().await.unwrap_or_default();
            let text = String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
            return Err(Error::Http {
                endpoint: endpoint.to_string(),
                status,
                body: text,
            });
        }
        Ok(answer)
    };
    tokio::time::timeout(timeout, attempt)
        .await
        .map_err(|_| Error::Unreachable(format!("{endpoint}: no answer within {timeout:?}")))?
}

async fn read_line(reader: &mut BufReader<TcpStream>, endpoint: &str) -> Result<String, Error> {
    let mut line = Vec::new();
    let n = (&mut *reader)
        .take(MAX_LINE as u64)
        .read_until(b'\n', &mut line)
        .await
        .map_err(|e| Error::Unreachable(format!("{endpoint}: {e}")))?;
    if n == 0 {
        return Err(malformed(endpoint, "connection closed mid-answer"));
    }
    if line.last() != Some(&b'\n') {
        return Err(malformed(endpoint, "header line too long"));
    }
    Ok(String::from_utf8_lossy(&line).trim_end().to_string())
}

impl Answer {
    /// The whole body (the connection closes after it).
    pub(crate) async fn whole(&mut self) -> Result<Vec<u8>, Error> {
        let mut body = Vec::new();
        while let Some(part) = self.next_part().await? {
            body.extend_from_slice(&part);
            if body.len() > MAX_BODY {
                return Err(malformed(&self.endpoint, "answer over the size bound"));
            }
        }
        Ok(body)
    }

    /// The next newline-separated message of a streamed answer; `None` when the stream ended.
    pub(crate) async fn next_message(&mut self) -> Result<Option<Vec<u8>>, Error> {
        loop {
            if let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
                let rest = self.pending.split_off(end + 1);
                let mut msg = std::mem::replace(&mut self.pending, rest);
                msg.pop();
                if msg.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                return Ok(Some(msg));
            }
            match self.next_part().await? {
                Some(part) => {
                    self.pending.extend_from_slice(&part);
                    if self.pending.len() > MAX_BODY {
                        return Err(malformed(&self.endpoint, "message over the size bound"));
                    }
                }
                None if self.pending.iter().all(u8::is_ascii_whitespace) => return Ok(None),
                None => return Ok(Some(std::mem::take(&mut self.pending))),
            }
        }
    }

    /// The next piece of body: a chunk, or what the fixed-length / until-close body has left.
    async fn next_part(&mut self) -> Result<Option<Vec<u8>>, Error> {
        if self.finished {
            return Ok(None);
        }
        let io = |e: std::io::Error| Error::Unreachable(format!("{}: {e}", self.endpoint));
        if self.chunked {
            let size_line = read_line(&mut self.reader, &self.endpoint).await?;
            let size_hex = size_line.split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size_hex, 16)
                .map_err(|_| malformed(&self.endpoint, format!("chunk size {size_line:?}")))?;
            if size > MAX_BODY {
                return Err(malformed(&self.endpoint, "chunk over the size bound"));
            }
            if size == 0 {
                self.finished = true;
                return Ok(None);
            }
            let mut chunk = vec![0; size + 2];
            self.reader.read_exact(&mut chunk).await.map_err(io)?;
            chunk.truncate(size);
            return Ok(Some(chunk));
        }
        let mut body = Vec::new();
        let limit = self.length.unwrap_or(MAX_BODY + 1);
        (&mut self.reader)
            .take(limit as u64)
            .read_to_end(&mut body)
            .await
            .map_err(io)?;
        self.finished = true;
        if body.len() > MAX_BODY {
            return Err(malformed(&self.endpoint, "answer over the size bound"));
        }
        Ok(Some(body))
    }
}
