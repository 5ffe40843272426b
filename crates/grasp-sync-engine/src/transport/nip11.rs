//! NIP-11 relay information: a bounded fetch over HTTP(S) and a lenient reading of the limits.
//!
//! The document is untrusted input: a field of the wrong type, a negative or absurd number is
//! read as "not advertised" rather than failing the whole document, and the body is capped.

use std::sync::Arc;
use std::time::Duration;

use grasp_sync_model::RelayUrl;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};

use super::guarded::open_stream;
use crate::address::AddressPolicy;
use crate::error::TransportError;
pub use crate::machine::nip77::NipListing;

/// Largest NIP-11 document read; a longer body is refused.
pub(crate) const MAX_INFO_BYTES: usize = 64 * 1024;

/// Largest limit value believed; anything above is treated as not advertised.
const MAX_BELIEVED_LIMIT: u64 = 1 << 31;

/// The parts of a relay's NIP-11 document the sync budgets use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RelayInfo {
    /// `limitation.max_subscriptions`.
    pub max_subscriptions: Option<u32>,
    /// `limitation.max_filters`.
    pub max_filters: Option<u32>,
    /// `limitation.max_limit` (never used to raise the pagination threshold).
    pub max_limit: Option<u32>,
    /// `limitation.default_limit` (a pagination hint, verified before trusted).
    pub default_limit: Option<u32>,
    /// `limitation.max_message_length`.
    pub max_message_length: Option<u32>,
    /// Whether `supported_nips` lists 77 (negentropy).
    pub nip77: NipListing,
}

impl NipListing {
    /// What `supported_nips` says about `nip`: numbers and numeric strings both count.
    fn of(supported_nips: Option<&Value>, nip: u64) -> Self {
        let Some(nips) = supported_nips.and_then(Value::as_array) else {
            return NipListing::Unknown;
        };
        let listed = nips.iter().any(|n| {
            n.as_u64() == Some(nip) || n.as_str().and_then(|s| s.trim().parse().ok()) == Some(nip)
        });
        if listed {
            NipListing::Listed
        } else {
            NipListing::NotListed
        }
    }
}

impl RelayInfo {
    /// Reads a NIP-11 JSON document leniently. Only malformed JSON is an error.
    pub fn from_json(body: &[u8]) -> Result<Self, TransportError> {
        let doc: Value = serde_json::from_slice(body)
            .map_err(|e| TransportError::Info(format!("document is not json: {e}")))?;
        let limitation = doc.get("limitation");
        let limit = |name: &str| {
            limitation
                .and_then(|l| l.get(name))
                .and_then(Value::as_u64)
                .filter(|v| *v > 0 && *v <= MAX_BELIEVED_LIMIT)
                .and_then(|v| u32::try_from(v).ok())
        };
        Ok(Self {
            max_subscriptions: limit("max_subscriptions"),
            max_filters: limit("max_filters"),
            max_limit: limit("max_limit"),
            default_limit: limit("default_limit"),
            max_message_length: limit("max_message_length"),
            nip77: NipListing::of(doc.get("supported_nips"), 77),
        })
    }
}

/// Fetches a relay's NIP-11 document (`Accept: application/nostr+json`) within `timeout`,
/// from an address `policy` allows ([`connect_checked`](super::connect_checked)). The
/// request carries the relay's path (some relays live under one); a [`RelayUrl`] has no query.
pub async fn fetch_relay_info(
    policy: &AddressPolicy,
    url: &RelayUrl,
    timeout: Duration,
) -> Result<RelayInfo, TransportError> {
    match tokio::time::timeout(timeout, fetch(policy, url)).await {
        Ok(result) => result,
        Err(_) => Err(TransportError::Info("timed out".to_owned())),
    }
}

async fn fetch(policy: &AddressPolicy, relay: &RelayUrl) -> Result<RelayInfo, TransportError> {
    let url = url::Url::parse(relay.as_str()).map_err(|e| TransportError::BadUrl(e.to_string()))?;
    let host = url
        .host_str()
        .ok_or_else(|| TransportError::BadUrl("no host".to_owned()))?;
    let host_header = match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    };
    let stream = open_stream(policy, &url)
        .await
        .map_err(|error| match error {
            TransportError::Connect(reason) => TransportError::Info(format!("connect: {reason}")),
            other => other,
        })?;
    get(stream, &host_header, url.path()).await
}

async fn get<S>(stream: S, host: &str, path: &str) -> Result<RelayInfo, TransportError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| TransportError::Info(format!("http: {e}")))?;
    let driver = tokio::spawn(connection);
    let request = hyper::Request::get(path)
        .header(hyper::header::HOST, host)
        .header(hyper::header::ACCEPT, "application/nostr+json")
        .body(Empty::<Bytes>::new())
        .map_err(|e| TransportError::Info(format!("request: {e}")))?;
    let result = async {
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| TransportError::Info(format!("http: {e}")))?;
        if !response.status().is_success() {
            return Err(TransportError::Info(format!(
                "http status {}",
                response.status()
            )));
        }
        let body = Limited::new(response.into_body(), MAX_INFO_BYTES)
            .collect()
            .await
            .map_err(|e| TransportError::Info(format!("body: {e}")))?
            .to_bytes();
        RelayInfo::from_json(&body)
    }
    .await;
    driver.abort();
    result
}

pub(crate) fn tls_connector() -> Result<tokio_rustls::TlsConnector, TransportError> {
    use tokio_rustls::rustls::{ClientConfig, RootCertStore, crypto::ring};
    let roots = RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let config = ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| TransportError::Info(format!("tls setup: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

#[cfg(test)]
mod tests;
