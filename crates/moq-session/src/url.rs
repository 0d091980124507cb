//! `moqt://HOST:PORT/NAMESPACE` URLs.

use std::fmt;

use moq_wire::draft14::{MAX_NAMESPACE_FIELDS, TrackNamespace};
use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum UrlError {
    #[error("URL must start with moqt:// (got {0:?})")]
    Scheme(String),
    #[error("URL {0:?} has no host")]
    Host(String),
    #[error("URL {0:?} has no valid port (expected moqt://HOST:PORT/NAMESPACE)")]
    Port(String),
    #[error("URL {0:?} has no namespace path (expected moqt://HOST:PORT/NAMESPACE)")]
    Namespace(String),
    #[error("invalid namespace {0:?}: 1 to 32 non-empty fields separated by '/'")]
    InvalidNamespace(String),
}

/// Parses `a/b/c` into a namespace tuple; leading, trailing and repeated `/` are ignored.
pub fn parse_namespace(path: &str) -> Result<TrackNamespace, UrlError> {
    let fields: Vec<Vec<u8>> = path
        .split('/')
        .filter(|f| !f.is_empty())
        .map(|f| f.as_bytes().to_vec())
        .collect();
    if fields.is_empty() || fields.len() > MAX_NAMESPACE_FIELDS {
        return Err(UrlError::InvalidNamespace(path.to_owned()));
    }
    Ok(TrackNamespace(fields))
}

/// A parsed MoQ URL. The path names the track namespace (`/a/b` is the tuple `a`, `b`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoqUrl {
    pub host: String,
    pub port: u16,
    /// Path as written, starting with `/`, sent in the PATH setup parameter.
    pub path: String,
}

impl MoqUrl {
    pub fn parse(text: &str) -> Result<MoqUrl, UrlError> {
        let rest = text
            .strip_prefix("moqt://")
            .ok_or_else(|| UrlError::Scheme(text.to_owned()))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (host, after) = v6
                .split_once(']')
                .ok_or_else(|| UrlError::Host(text.to_owned()))?;
            (host, after.strip_prefix(':'))
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            }
        };
        if host.is_empty() {
            return Err(UrlError::Host(text.to_owned()));
        }
        let port = port
            .and_then(|p| p.parse::<u16>().ok())
            .filter(|p| *p != 0)
            .ok_or_else(|| UrlError::Port(text.to_owned()))?;
        let path = path.split(['?', '#']).next().unwrap_or_default();
        if path.trim_matches('/').is_empty() {
            return Err(UrlError::Namespace(text.to_owned()));
        }
        parse_namespace(path)?;
        Ok(MoqUrl {
            host: host.to_owned(),
            port,
            path: path.to_owned(),
        })
    }

    /// The namespace tuple named by the path.
    pub fn namespace(&self) -> Result<TrackNamespace, UrlError> {
        parse_namespace(&self.path)
    }

    /// `host:port` for socket address resolution.
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl fmt::Display for MoqUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "moqt://{}{}", self.authority(), self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_host_port_and_namespace() {
        let u = MoqUrl::parse("moqt://127.0.0.1:4443/live").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("127.0.0.1", 4443, "/live")
        );
        assert_eq!(u.namespace(), Ok(TrackNamespace(vec![b"live".to_vec()])));
        assert_eq!(u.to_string(), "moqt://127.0.0.1:4443/live");
        let u = MoqUrl::parse("moqt://[::1]:9000/anon/cam?x=1").unwrap();
        assert_eq!(u.host, "::1");
        assert_eq!(u.namespace().unwrap().to_path(), "anon/cam");
        assert_eq!(u.authority(), "[::1]:9000");
    }

    #[test]
    fn rejects_what_cannot_be_used() {
        assert!(matches!(
            MoqUrl::parse("https://h:1/x"),
            Err(UrlError::Scheme(_))
        ));
        assert!(matches!(
            MoqUrl::parse("moqt://:1/x"),
            Err(UrlError::Host(_))
        ));
        assert!(matches!(
            MoqUrl::parse("moqt://h/x"),
            Err(UrlError::Port(_))
        ));
        assert!(matches!(
            MoqUrl::parse("moqt://h:0/x"),
            Err(UrlError::Port(_))
        ));
        assert!(matches!(
            MoqUrl::parse("moqt://h:99999/x"),
            Err(UrlError::Port(_))
        ));
        assert!(matches!(
            MoqUrl::parse("moqt://h:1"),
            Err(UrlError::Namespace(_))
        ));
        assert!(matches!(
            MoqUrl::parse("moqt://h:1//"),
            Err(UrlError::Namespace(_))
        ));
        let deep = format!("moqt://h:1/{}", "x/".repeat(33));
        assert!(matches!(
            MoqUrl::parse(&deep),
            Err(UrlError::InvalidNamespace(_))
        ));
        assert!(parse_namespace("/a//b/").is_ok_and(|n| n.to_path() == "a/b"));
    }
}
