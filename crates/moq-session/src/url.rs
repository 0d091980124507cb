//! `moqt://HOST[:PORT]/PATH[?QUERY]` URLs, and where they say a broadcast is.
//!
//! Both elements read a URL the same way, so the same URL on a publisher and a player
//! addresses the same broadcast: the last path segment names the broadcast (the track
//! namespace) and the path before it is the session's root (the PATH setup parameter, a
//! relay's scope for names and authorization), unless a namespace is given separately,
//! in which case the whole path is the root. `moqt://relay:4443/anon/show` is broadcast
//! `show` under root `/anon`; `moqt://127.0.0.1:4443/live` is `live` under `/`. The query
//! (e.g. `?jwt=…`, how moq-relay takes a token) travels with the root in PATH.

use std::fmt;
use std::path::{Path, PathBuf};

use moq_wire::message::{MAX_NAMESPACE_FIELDS, TrackNamespace};
use thiserror::Error;

/// The port of a `moqt://` URL that gives none.
pub const DEFAULT_PORT: u16 = 443;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum UrlError {
    #[error("URL must start with moqt:// (got {0:?})")]
    Scheme(String),
    #[error("URL {0:?} has no host")]
    Host(String),
    #[error("URL {0:?} has no valid port (expected moqt://HOST[:PORT]/PATH)")]
    Port(String),
    #[error("URL {0:?} names no broadcast: give it as the last path segment or set a namespace")]
    Namespace(String),
    #[error("invalid namespace {0:?}: 1 to 32 non-empty fields separated by '/'")]
    InvalidNamespace(String),
    #[error("invalid {0}={1:?} in the URL's query: expected true or false")]
    Flag(&'static str, String),
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

/// A parsed MoQ URL.
#[derive(Clone, PartialEq, Eq)]
pub struct MoqUrl {
    pub host: String,
    pub port: u16,
    /// Path as written (`/` when there is none).
    pub path: String,
    /// The query without its `?`, kept for the PATH setup parameter (it may carry a
    /// token, so it is never displayed).
    pub query: Option<String>,
}

/// What a URL's query says about the connection itself: settings for the element, not the
/// server. A URI handed to `playbin` has no other way to carry them; they win over the
/// element's properties of the same names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QuerySettings {
    pub tls_fingerprint: Option<String>,
    pub tls_ca_file: Option<PathBuf>,
    pub tls_insecure: Option<bool>,
    pub versions: Option<String>,
}

impl QuerySettings {
    /// How to check the server's certificate: these settings, else the element's.
    pub fn trust(
        &self,
        fingerprint: Option<&str>,
        ca_file: Option<&Path>,
        insecure: bool,
    ) -> Result<crate::tls::Trust, crate::tls::TlsError> {
        crate::tls::Trust::choose(
            self.tls_fingerprint.as_deref().or(fingerprint),
            self.tls_ca_file.as_deref().or(ca_file),
            self.tls_insecure.unwrap_or(insecure),
        )
    }
}

/// Where a URL (and maybe a separate namespace) puts a broadcast.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// The PATH setup parameter: the root, and the URL's query.
    pub setup_path: String,
    pub namespace: TrackNamespace,
}

impl MoqUrl {
    pub fn parse(text: &str) -> Result<MoqUrl, UrlError> {
        let rest = text
            .strip_prefix("moqt://")
            .ok_or_else(|| UrlError::Scheme(text.to_owned()))?;
        let rest = rest.split('#').next().unwrap_or_default();
        let (rest, query) = match rest.split_once('?') {
            Some((rest, query)) => (rest, Some(query.to_owned()).filter(|q| !q.is_empty())),
            None => (rest, None),
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, "/"),
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
        let port = match port {
            None => DEFAULT_PORT,
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| UrlError::Port(text.to_owned()))?,
        };
        Ok(MoqUrl {
            host: host.to_owned(),
            port,
            path: path.to_owned(),
            query,
        })
    }

    /// The broadcast this URL names: with `namespace`, that namespace under the whole
    /// path as root; without, the last path segment under the path before it.
    pub fn locate(&self, namespace: Option<&str>) -> Result<Located, UrlError> {
        let trimmed = self.path.trim_end_matches('/');
        let (root, namespace) = match namespace {
            Some(ns) => (trimmed, parse_namespace(ns)?),
            None => {
                let (root, last) = trimmed.rsplit_once('/').unwrap_or(("", trimmed));
                if last.is_empty() {
                    return Err(UrlError::Namespace(self.to_string()));
                }
                (root, parse_namespace(last)?)
            }
        };
        let root = if root.is_empty() { "/" } else { root };
        let setup_path = match &self.query {
            Some(query) => format!("{root}?{query}"),
            None => root.to_owned(),
        };
        Ok(Located {
            setup_path,
            namespace,
        })
    }

    /// Takes `key` out of the query, for parameters meant for the element rather than the
    /// server (e.g. `tls-fingerprint` in a URI given to playbin).
    pub fn take_query_param(&mut self, key: &str) -> Option<String> {
        let query = self.query.take()?;
        let mut value = None;
        let rest: Vec<&str> = query
            .split('&')
            .filter(|pair| match pair.split_once('=') {
                Some((k, v)) if k == key => {
                    value = Some(v.to_owned());
                    false
                }
                _ => true,
            })
            .collect();
        self.query = Some(rest.join("&")).filter(|q| !q.is_empty());
        value
    }

    /// Takes the element's settings (`tls-fingerprint`, `tls-ca-file`, `tls-insecure`,
    /// `versions`) out of the query; the rest (e.g. `jwt`) goes to the server.
    pub fn take_settings(&mut self) -> Result<QuerySettings, UrlError> {
        let tls_insecure = match self.take_query_param("tls-insecure") {
            None => None,
            Some(v) => Some(match v.as_str() {
                "true" | "1" => true,
                "false" | "0" => false,
                _ => return Err(UrlError::Flag("tls-insecure", v)),
            }),
        };
        Ok(QuerySettings {
            tls_fingerprint: self.take_query_param("tls-fingerprint"),
            tls_ca_file: self.take_query_param("tls-ca-file").map(PathBuf::from),
            tls_insecure,
            versions: self.take_query_param("versions"),
        })
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
    /// Without the query, which may hold a token.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "moqt://{}{}", self.authority(), self.path)
    }
}

impl fmt::Debug for MoqUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MoqUrl({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(path: &str) -> TrackNamespace {
        parse_namespace(path).unwrap()
    }

    #[test]
    fn the_last_segment_names_the_broadcast_and_the_rest_is_the_root() {
        let u = MoqUrl::parse("moqt://127.0.0.1:4443/live").unwrap();
        assert_eq!((u.host.as_str(), u.port), ("127.0.0.1", 4443));
        assert_eq!(
            u.locate(None).unwrap(),
            Located {
                setup_path: "/".into(),
                namespace: ns("live")
            }
        );
        assert_eq!(u.to_string(), "moqt://127.0.0.1:4443/live");
        let relay = MoqUrl::parse("moqt://relay.example:4443/anon/show/").unwrap();
        assert_eq!(
            relay.locate(None).unwrap(),
            Located {
                setup_path: "/anon".into(),
                namespace: ns("show")
            }
        );
        // A namespace of its own makes the whole path the root.
        assert_eq!(
            relay.locate(Some("cam/1")).unwrap(),
            Located {
                setup_path: "/anon/show".into(),
                namespace: ns("cam/1")
            }
        );
        let bare = MoqUrl::parse("moqt://[::1]:9000").unwrap();
        assert_eq!(bare.authority(), "[::1]:9000");
        assert_eq!(bare.locate(Some("live")).unwrap().setup_path, "/");
        assert!(matches!(bare.locate(None), Err(UrlError::Namespace(_))));
    }

    #[test]
    fn the_query_goes_with_the_root_and_is_never_displayed() {
        let u = MoqUrl::parse("moqt://relay:4443/demo/show?jwt=abc.def#frag").unwrap();
        assert_eq!(u.query.as_deref(), Some("jwt=abc.def"));
        assert_eq!(u.locate(None).unwrap().setup_path, "/demo?jwt=abc.def");
        assert_eq!(
            u.locate(Some("x")).unwrap().setup_path,
            "/demo/show?jwt=abc.def"
        );
        assert!(!u.to_string().contains("jwt"));
        assert!(!format!("{u:?}").contains("jwt"));
    }

    #[test]
    fn element_parameters_come_out_of_the_query() {
        let mut u = MoqUrl::parse("moqt://h/a/b?tls-fingerprint=ab12&jwt=t").unwrap();
        assert_eq!(
            u.take_query_param("tls-fingerprint").as_deref(),
            Some("ab12")
        );
        assert_eq!(u.query.as_deref(), Some("jwt=t"));
        assert_eq!(u.take_query_param("tls-fingerprint"), None);
        let mut only = MoqUrl::parse("moqt://h/a?tls-fingerprint=ab12").unwrap();
        only.take_query_param("tls-fingerprint");
        assert_eq!(only.query, None);
        assert_eq!(only.locate(None).unwrap().setup_path, "/");
    }

    #[test]
    fn the_port_defaults_to_443() {
        let u = MoqUrl::parse("moqt://relay.example/anon/show").unwrap();
        assert_eq!(u.port, DEFAULT_PORT);
        assert_eq!(u.authority(), "relay.example:443");
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
        for bad in ["moqt://h:0/x", "moqt://h:99999/x", "moqt://h:port/x"] {
            assert!(
                matches!(MoqUrl::parse(bad), Err(UrlError::Port(_))),
                "{bad}"
            );
        }
        let root_only = MoqUrl::parse("moqt://h:1//").unwrap();
        assert!(matches!(
            root_only.locate(None),
            Err(UrlError::Namespace(_))
        ));
        let deep = MoqUrl::parse("moqt://h:1/x").unwrap();
        assert!(matches!(
            deep.locate(Some(&"x/".repeat(33))),
            Err(UrlError::InvalidNamespace(_))
        ));
        assert!(parse_namespace("/a//b/").is_ok_and(|n| n.to_path() == "a/b"));
    }

    #[test]
    fn the_query_gives_the_element_its_connection_settings_and_the_rest_to_the_server() {
        let mut url = MoqUrl::parse(
            "moqt://h:4443/anon/live?jwt=T&tls-insecure=true&versions=22,20&tls-ca-file=/etc/ca.pem",
        )
        .unwrap();
        let own = url.take_settings().unwrap();
        assert_eq!(own.tls_insecure, Some(true));
        assert_eq!(own.versions.as_deref(), Some("22,20"));
        assert_eq!(own.tls_ca_file, Some(PathBuf::from("/etc/ca.pem")));
        assert_eq!(own.tls_fingerprint, None);
        assert_eq!(url.query.as_deref(), Some("jwt=T"));
        // The URL's own setting wins over the element's property: its CA file (which does
        // not exist) is read, not the property's "anything goes".
        let err = own.trust(None, None, true).unwrap_err().to_string();
        assert!(err.contains("/etc/ca.pem"), "{err}");
        let insecure = QuerySettings {
            tls_insecure: Some(true),
            ..QuerySettings::default()
        };
        assert!(matches!(
            insecure.trust(None, None, false),
            Ok(crate::tls::Trust::Insecure)
        ));
        let mut bad = MoqUrl::parse("moqt://h/live?tls-insecure=maybe").unwrap();
        assert_eq!(
            bad.take_settings(),
            Err(UrlError::Flag("tls-insecure", "maybe".into()))
        );
    }
}
