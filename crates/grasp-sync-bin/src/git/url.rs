//! Which clone URLs the fetcher may fetch from: the same outbound-address rules as relay
//! dials (the engine's `AddressPolicy`, applied to every address the host resolves to), only
//! `https`, `http` and `git` by default (`file` when allowed, for tests and local mirrors), no
//! URL that git could read as an option, and none on the service's own domain (that is this
//! server's own git data).

use std::net::{IpAddr, SocketAddr};

use grasp_sync_engine::AddressPolicy;

/// Why a clone URL is not fetched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CloneUrlRefusal {
    /// Not a URL, or one git could read as an option or a different transport.
    #[error("not a plain clone url")]
    Malformed,
    /// A scheme other than https, http or git (or file, when allowed).
    #[error("scheme `{0}` is not fetched")]
    Scheme(String),
    /// On the service's own domain: this server's own copy.
    #[error("the service's own clone url")]
    Own,
    /// The host resolved to no address, or failed to resolve.
    #[error("host does not resolve")]
    Unresolved,
    /// An address the host resolved to is refused by the address policy.
    #[error("host resolves to a refused address ({0})")]
    Address(&'static str),
}

impl CloneUrlRefusal {
    /// A short label for metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Malformed => "malformed",
            Self::Scheme(_) => "scheme",
            Self::Own => "own",
            Self::Unresolved => "unresolved",
            Self::Address(_) => "address",
        }
    }
}

/// A clone URL that passed the rules, with the address to pin an http(s) fetch to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloneTarget {
    /// The URL as git gets it.
    pub url: String,
    /// `host:port:address` for git's `http.curloptResolve`, so git connects to the address
    /// that was checked; `None` for `file` and `git` URLs.
    pub pinned: Option<String>,
}

/// The rules for clone URLs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CloneUrlRules {
    /// The relay dials' address policy.
    pub address_policy: AddressPolicy,
    /// Whether `file://` URLs may be fetched.
    pub allow_file: bool,
    /// The service's own domain (clone URLs on it are skipped).
    pub own_domain: String,
}

impl CloneUrlRules {
    /// Checks a URL's form: scheme, shape and own domain. No network access.
    pub fn check_form(&self, text: &str) -> Result<::url::Url, CloneUrlRefusal> {
        if text.is_empty()
            || text.starts_with('-')
            || text.len() > 2_048
            || text.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(CloneUrlRefusal::Malformed);
        }
        let url = ::url::Url::parse(text).map_err(|_| CloneUrlRefusal::Malformed)?;
        match url.scheme() {
            "https" | "http" | "git" => {}
            "file" if self.allow_file => return Ok(url),
            other => return Err(CloneUrlRefusal::Scheme(other.to_owned())),
        }
        let host = url.host_str().ok_or(CloneUrlRefusal::Malformed)?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(CloneUrlRefusal::Malformed);
        }
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if bare
            .trim_end_matches('.')
            .eq_ignore_ascii_case(self.own_domain.trim_end_matches('.'))
        {
            return Err(CloneUrlRefusal::Own);
        }
        Ok(url)
    }

    /// Checks a URL fully: its form, then every address its host resolves to.
    pub async fn check(&self, text: &str) -> Result<CloneTarget, CloneUrlRefusal> {
        let url = self.check_form(text)?;
        if url.scheme() == "file" {
            return Ok(CloneTarget {
                url: url.to_string(),
                pinned: None,
            });
        }
        let host = url.host_str().ok_or(CloneUrlRefusal::Malformed)?;
        let bare = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        let port = url
            .port_or_known_default()
            .unwrap_or(if url.scheme() == "git" { 9418 } else { 443 });
        let addresses: Vec<SocketAddr> = match bare.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, port)],
            Err(_) => tokio::net::lookup_host((bare.as_str(), port))
                .await
                .map_err(|_| CloneUrlRefusal::Unresolved)?
                .collect(),
        };
        let first = *addresses.first().ok_or(CloneUrlRefusal::Unresolved)?;
        for address in &addresses {
            self.address_policy
                .check_address(&bare, address.ip())
                .map_err(|refusal| CloneUrlRefusal::Address(refusal.label()))?;
        }
        let pinned = matches!(url.scheme(), "https" | "http").then(|| {
            let ip = match first.ip() {
                IpAddr::V6(ip) => format!("[{ip}]"),
                IpAddr::V4(ip) => ip.to_string(),
            };
            format!("{host}:{port}:{ip}")
        });
        Ok(CloneTarget {
            url: url.to_string(),
            pinned,
        })
    }
}
