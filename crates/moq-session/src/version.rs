//! The MoQ Transport drafts a session may speak, negotiated by TLS ALPN: the client offers
//! the ones it allows, the server picks (its order first), and the session uses that
//! draft's codec for everything after the handshake.

use std::fmt;
use std::str::FromStr;

use moq_wire::codec::Codec;
use moq_wire::{draft14, draft16, draft20, draft22};

/// A draft of MoQ Transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    /// draft-ietf-moq-transport-14, ALPN `moq-00` with the version in SETUP.
    Draft14,
    /// draft-ietf-moq-transport-16, ALPN `moqt-16`.
    Draft16,
    /// draft-ietf-moq-transport-20, ALPN `moqt-20`.
    Draft20,
    /// draft-ietf-moq-transport-22, ALPN `moqt-22`.
    Draft22,
}

impl Version {
    /// Every draft spoken here, newest first.
    pub const ALL: [Version; 4] = [
        Version::Draft22,
        Version::Draft20,
        Version::Draft16,
        Version::Draft14,
    ];

    /// The draft's wire form: the one place a session's draft decides anything.
    pub fn codec(self) -> &'static dyn Codec {
        match self {
            Version::Draft14 => &draft14::CODEC,
            Version::Draft16 => &draft16::CODEC,
            Version::Draft20 => &draft20::CODEC,
            Version::Draft22 => &draft22::CODEC,
        }
    }

    pub fn alpn(self) -> &'static [u8] {
        self.codec().alpn()
    }

    pub fn from_alpn(alpn: &[u8]) -> Option<Version> {
        Version::ALL.into_iter().find(|v| v.alpn() == alpn)
    }

    /// The version number of SETUP (0xff000000 + draft).
    pub fn code(self) -> u64 {
        self.codec().version()
    }

    /// The draft's number: 14, 16, 20, 22.
    pub fn draft(self) -> u32 {
        self.codec().draft()
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "draft-{}", self.draft())
    }
}

/// [`Versions::default`] as the elements' `versions` property spells it.
pub const DEFAULT_VERSIONS: &str = "22,20,16,14";

/// The drafts an endpoint allows, in order of preference: parsed from draft numbers
/// separated by commas (`"16,14"`, `"14"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Versions {
    list: [Version; Version::ALL.len()],
    len: usize,
}

impl Versions {
    pub fn list(&self) -> &[Version] {
        &self.list[..self.len]
    }

    /// ALPN tokens to offer or accept, in order.
    pub fn alpns(&self) -> Vec<Vec<u8>> {
        self.list().iter().map(|v| v.alpn().to_vec()).collect()
    }

    /// The draft numbers, as the property shows them (`"16,14"`).
    pub fn to_list_string(&self) -> String {
        list_string(self.list())
    }

    /// Every draft spoken here that this list leaves out.
    pub fn others(&self) -> Vec<Version> {
        Version::ALL
            .into_iter()
            .filter(|v| !self.list().contains(v))
            .collect()
    }

    fn push(&mut self, version: Version) {
        if !self.list().contains(&version) && self.len < self.list.len() {
            self.list[self.len] = version;
            self.len += 1;
        }
    }
}

/// Every draft, newest first: the newest passes the whole relay suite against moq-relay
/// 0.17.10 (pipelines/interop.sh), which picks it when offered all; a peer that lacks it
/// picks an older one.
impl Default for Versions {
    fn default() -> Versions {
        let mut versions: Versions = Version::ALL[0].into();
        Version::ALL.into_iter().for_each(|v| versions.push(v));
        versions
    }
}

impl From<Version> for Versions {
    fn from(version: Version) -> Versions {
        Versions {
            list: [version; Version::ALL.len()],
            len: 1,
        }
    }
}

impl FromStr for Versions {
    type Err = String;

    fn from_str(text: &str) -> Result<Versions, String> {
        let mut list: Option<Versions> = None;
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let version = Version::ALL
                .into_iter()
                .find(|v| v.draft().to_string() == item)
                .ok_or_else(|| {
                    format!(
                        "unknown MoQ Transport draft {item:?} (supported: {})",
                        supported()
                    )
                })?;
            match &mut list {
                Some(list) => list.push(version),
                None => list = Some(version.into()),
            }
        }
        list.ok_or_else(|| format!("no MoQ Transport draft given (supported: {})", supported()))
    }
}

/// Draft numbers separated by commas.
pub(crate) fn list_string(versions: &[Version]) -> String {
    let numbers: Vec<String> = versions.iter().map(|v| v.draft().to_string()).collect();
    numbers.join(",")
}

/// The drafts spoken here, as an error message lists them.
fn supported() -> String {
    list_string(&Version::ALL).replace(',', ", ")
}

/// The draft a finished handshake agreed on (its ALPN).
pub(crate) fn negotiated(conn: &quinn::Connection) -> Option<Version> {
    let data = conn.handshake_data()?;
    let data = data
        .downcast::<quinn::crypto::rustls::HandshakeData>()
        .ok()?;
    Version::from_alpn(data.protocol.as_deref()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_in_order_without_repeats() {
        let v: Versions = "14, 16,14".parse().unwrap();
        assert_eq!(v.list(), [Version::Draft14, Version::Draft16]);
        assert_eq!(v.to_list_string(), "14,16");
        assert_eq!(Versions::default().to_list_string(), DEFAULT_VERSIONS);
        assert_eq!(v.alpns(), [b"moq-00".to_vec(), b"moqt-16".to_vec()]);
        assert!("15".parse::<Versions>().unwrap_err().contains("15"));
        assert!(" , ".parse::<Versions>().is_err());
        assert_eq!(Version::from_alpn(b"moqt-16"), Some(Version::Draft16));
        assert_eq!(Version::Draft14.to_string(), "draft-14");
    }
}
