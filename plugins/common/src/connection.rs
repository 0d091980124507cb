//! The connection properties both elements have (url, backup-urls, namespace, tls-fingerprint,
//! tls-ca-file, tls-insecure, auth-token, versions): one definition of their ParamSpecs,
//! values and parsing, with the blurbs of the side that uses them.

use std::path::PathBuf;

use gst::glib;
use gst::prelude::*;
use moq_session::tls::Trust;
use moq_session::{DEFAULT_VERSIONS, MoqUrl, Versions};

/// Which element the properties are on: the wording differs, not the meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// moqsink: with `url` it publishes through a relay, otherwise it listens.
    Publisher,
    /// moqsrc: it always connects.
    Subscriber,
}

/// The values of the connection properties.
#[derive(Debug, Clone)]
pub struct Connection {
    pub url: Option<String>,
    /// Comma-separated URLs of other servers to use when the one in use fails or moves.
    pub backup_urls: Option<String>,
    /// Set explicitly; `None`: the URL's last path segment (or the element's default).
    pub namespace: Option<String>,
    /// Pins the server's certificate.
    pub tls_fingerprint: Option<String>,
    pub tls_ca_file: Option<PathBuf>,
    pub tls_insecure: bool,
    /// Sent in SETUP's AUTHORIZATION TOKEN.
    pub auth_token: Option<String>,
    /// MoQ Transport drafts, as the property spells them (parsed at start).
    pub versions: String,
}

impl Default for Connection {
    fn default() -> Self {
        Connection {
            url: None,
            backup_urls: None,
            namespace: None,
            tls_fingerprint: None,
            tls_ca_file: None,
            tls_insecure: false,
            auth_token: None,
            versions: DEFAULT_VERSIONS.into(),
        }
    }
}

/// A URL to connect to, with what its query says and the properties say beneath it.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// Without the query's connection settings (the rest goes to the server).
    pub url: MoqUrl,
    pub trust: Trust,
    pub versions: Versions,
}

/// A string property's value: `None` for unset or empty. GObject has checked the value's
/// type against the ParamSpec.
pub fn text(value: &glib::Value) -> Option<String> {
    value
        .get::<Option<String>>()
        .unwrap_or_default()
        .filter(|t| !t.is_empty())
}

const QUERY_NOTE: &str = "the query (e.g. ?jwt=TOKEN) goes to the server, except tls-fingerprint, tls-ca-file, tls-insecure and versions, which set this element";

impl Connection {
    /// The ParamSpecs, all settable in NULL and READY.
    pub fn properties(side: Side) -> Vec<glib::ParamSpec> {
        let (url, backups, namespace, server) = match side {
            Side::Publisher => (
                format!(
                    "Publish through the MoQ relay at moqt://HOST[:PORT]/ROOT/BROADCAST[?QUERY] (port 443 by default) instead of listening: connect, announce the broadcast (PUBLISH_NAMESPACE), serve the relay's SUBSCRIBEs; reconnects with capped backoff. The same URL on moqsrc plays it; {QUERY_NOTE}"
                ),
                "Comma-separated moqt:// URLs of other relays of the same cluster (each may carry its own ?tls-fingerprint=): tried in turn when the relay in use fails, and where the broadcast moves when a relay says GOAWAY (announced there before the old session closes)",
                "Track namespace (the broadcast) to publish; '/' separates tuple fields. Unset: with url, the URL's last path segment (the path before it is the relay's root), otherwise live",
                "With url: the relay",
            ),
            Side::Subscriber => (
                format!(
                    "MoQ publisher or relay to subscribe to: moqt://HOST[:PORT]/[ROOT/]BROADCAST[?QUERY] (port 443 by default), the URL moqsink listens or publishes at; {QUERY_NOTE}"
                ),
                "Comma-separated moqt:// URLs of other servers carrying the same broadcast (e.g. the other relays of a cluster; each may carry its own ?tls-fingerprint=). When the server in use fails, or sends no media for 2 s, the next one is tried, in turn, until media-timeout; it goes on there from the groups it had got to if the same publisher's stream played within 5 s, else at the live edge",
                "Track namespace (the broadcast); '/' separates fields. Unset: the URL's last path segment, the path before it being the relay's root. Set: the whole URL path is the root",
                "The server (a listening moqsink or a relay)",
            ),
        };
        let versions = match side {
            Side::Publisher => {
                "Drafts of MoQ Transport to offer (with url) or accept (listening), preferred first, as draft numbers separated by commas: 22 (ALPN moqt-22), 20 (ALPN moqt-20), 16 (ALPN moqt-16), 14 (ALPN moq-00). The server picks: a listening sink by this order, a relay by its own"
            }
            Side::Subscriber => {
                "Drafts of MoQ Transport to offer, preferred first, as draft numbers separated by commas: 22 (ALPN moqt-22), 20 (ALPN moqt-20), 16 (ALPN moqt-16), 14 (ALPN moq-00); the server picks one. moq-connected tells which"
            }
        };
        let string = |name: &str, nick: &str, blurb: &str| {
            glib::ParamSpecString::builder(name)
                .nick(nick)
                .blurb(blurb)
                .mutable_ready()
                .build()
        };
        vec![
            string("url", "URL", &url),
            string("backup-urls", "Backup URLs", backups),
            string("namespace", "Namespace", namespace),
            string(
                "tls-fingerprint",
                "TLS fingerprint",
                &format!(
                    "{server} must have a certificate with this SHA-256 fingerprint (hex; a listening moqsink's tls-cert-fingerprint, also in its moq-listening message). Without it, tls-ca-file or tls-insecure, one the system's root CAs trust"
                ),
            ),
            string(
                "tls-ca-file",
                "TLS CA file",
                &format!(
                    "{server} must have a certificate that chains to a CA in this PEM file (instead of the system's)"
                ),
            ),
            glib::ParamSpecBoolean::builder("tls-insecure")
                .nick("TLS insecure")
                .blurb(&format!(
                    "{server} may have any certificate (testing, or a trusted network only)"
                ))
                .default_value(false)
                .mutable_ready()
                .build(),
            glib::ParamSpecString::builder("auth-token")
                .nick("Authorization token")
                .blurb(
                    "A token (e.g. a JWT for moq-relay) sent in SETUP's AUTHORIZATION TOKEN parameter; a ?jwt= in the url works too. Never displayed. Settable while playing: a new token is presented on a new session that takes over from the one in use without a gap (a relay closes a session whose token expires)",
                )
                .mutable_playing()
                .build(),
            glib::ParamSpecString::builder("versions")
                .nick("MoQ Transport drafts")
                .blurb(versions)
                .default_value(Some(DEFAULT_VERSIONS))
                .mutable_ready()
                .build(),
        ]
    }

    /// Sets the property `name` if it is one of these; false otherwise. GObject has checked
    /// the value's type against the ParamSpec.
    pub fn set(&mut self, name: &str, value: &glib::Value) -> bool {
        let text = || text(value);
        match name {
            "url" => self.url = text(),
            "backup-urls" => self.backup_urls = text(),
            "namespace" => self.namespace = text(),
            "tls-fingerprint" => self.tls_fingerprint = text(),
            "tls-ca-file" => self.tls_ca_file = text().map(PathBuf::from),
            "tls-insecure" => self.tls_insecure = value.get().unwrap_or_default(),
            "auth-token" => self.auth_token = text(),
            "versions" => self.versions = text().unwrap_or_else(|| DEFAULT_VERSIONS.into()),
            _ => return false,
        }
        true
    }

    /// The property `name`'s value if it is one of these.
    pub fn get(&self, name: &str) -> Option<glib::Value> {
        Some(match name {
            "url" => self.url.to_value(),
            "backup-urls" => self.backup_urls.to_value(),
            "namespace" => self.namespace.to_value(),
            "tls-fingerprint" => self.tls_fingerprint.to_value(),
            "tls-ca-file" => self
                .tls_ca_file
                .as_ref()
                .map(|p| p.display().to_string())
                .to_value(),
            "tls-insecure" => self.tls_insecure.to_value(),
            // Write-only in effect: a secret is not read back.
            "auth-token" => self.auth_token.as_ref().map(|_| "***").to_value(),
            "versions" => self.versions.to_value(),
            _ => return None,
        })
    }

    /// The `versions` property, parsed.
    pub fn versions(&self) -> Result<Versions, String> {
        self.versions.parse().map_err(|e| format!("versions: {e}"))
    }

    /// What the URI handler's `set_uri` does, for either element: a `moqt://` URI becomes
    /// `url`, in NULL or READY only (`running`: the element is past READY).
    pub fn set_uri(&mut self, uri: &str, running: bool) -> Result<(), glib::Error> {
        if running {
            return Err(glib::Error::new(
                gst::URIError::BadState,
                "the URI can only be set in the NULL or READY state",
            ));
        }
        MoqUrl::parse(uri).map_err(|e| glib::Error::new(gst::URIError::BadUri, &e.to_string()))?;
        self.url = Some(uri.to_owned());
        Ok(())
    }

    /// The backup URLs, in order.
    pub fn backups(&self) -> impl Iterator<Item = &str> {
        self.backup_urls
            .iter()
            .flat_map(|list| list.split(','))
            .map(str::trim)
            .filter(|t| !t.is_empty())
    }

    /// `text` as a URL to connect to: what its query sets comes before these properties.
    pub fn endpoint(&self, text: &str) -> Result<Endpoint, String> {
        let mut url = MoqUrl::parse(text).map_err(|e| format!("invalid url {text:?}: {e}"))?;
        let own = url.take_settings().map_err(|e| format!("{url}: {e}"))?;
        let trust = own
            .trust(
                self.tls_fingerprint.as_deref(),
                self.tls_ca_file.as_deref(),
                self.tls_insecure,
            )
            .map_err(|e| format!("{url}: {e}"))?;
        let versions = match own.versions {
            Some(list) => list.parse().map_err(|e| format!("versions: {e}"))?,
            None => self.versions()?,
        };
        Ok(Endpoint {
            url,
            trust,
            versions,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_property_sets_and_reads_back_except_the_secret() {
        gst::init().unwrap();
        let mut connection = Connection::default();
        for spec in Connection::properties(Side::Subscriber) {
            let value = match spec.value_type() {
                t if t == bool::static_type() => true.to_value(),
                _ => Some("22,14").to_value(),
            };
            assert!(connection.set(spec.name(), &value), "{}", spec.name());
            let read = connection.get(spec.name()).unwrap();
            if spec.name() == "auth-token" {
                assert_eq!(
                    read.get::<Option<String>>().unwrap().as_deref(),
                    Some("***")
                );
            } else {
                assert_eq!(format!("{read:?}"), format!("{value:?}"), "{}", spec.name());
            }
        }
        assert!(!connection.set("latency", &1u32.to_value()));
        assert!(connection.get("latency").is_none());
    }

    #[test]
    fn the_query_comes_before_the_properties_and_backups_are_split() {
        let connection = Connection {
            versions: "14".into(),
            backup_urls: Some(" moqt://a:1/x , ,moqt://b:2/y".into()),
            tls_insecure: true,
            ..Connection::default()
        };
        let endpoint = connection
            .endpoint("moqt://relay:4443/anon/show?versions=22&jwt=T")
            .unwrap();
        assert_eq!(endpoint.versions.to_list_string(), "22");
        assert_eq!(
            endpoint.url.query.as_deref(),
            Some("jwt=T"),
            "the rest goes to the server"
        );
        assert_eq!(
            connection
                .endpoint("moqt://relay/x")
                .unwrap()
                .versions
                .to_list_string(),
            "14"
        );
        assert_eq!(
            connection.backups().collect::<Vec<_>>(),
            ["moqt://a:1/x", "moqt://b:2/y"]
        );
        assert!(connection.endpoint("http://relay/x").is_err());
    }
}
