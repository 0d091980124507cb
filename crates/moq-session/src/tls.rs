//! TLS identities and trust policies for MoQ over raw QUIC.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use sha2::{Digest, Sha256};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum TlsError {
    #[error("cannot generate a self-signed certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("cannot read certificate file {path}: {reason}")]
    CertFile { path: String, reason: String },
    #[error("cannot read private key file {path}: {reason}")]
    KeyFile { path: String, reason: String },
    #[error("TLS configuration rejected: {0}")]
    Config(#[from] rustls::Error),
    #[error("invalid certificate fingerprint {0:?}: expected 64 hex digits (SHA-256)")]
    Fingerprint(String),
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// SHA-256 of a DER certificate.
pub type Fingerprint = [u8; 32];

pub fn fingerprint(cert: &CertificateDer<'_>) -> Fingerprint {
    Sha256::digest(cert.as_ref()).into()
}

pub fn fingerprint_hex(fp: &Fingerprint) -> String {
    fp.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Parses 64 hex digits, optionally separated by `:` (as browsers and openssl print them).
pub fn parse_fingerprint(text: &str) -> Result<Fingerprint, TlsError> {
    let digits: String = text.chars().filter(|c| *c != ':').collect();
    let bad = || TlsError::Fingerprint(text.to_owned());
    if digits.len() != 64 || !digits.is_ascii() {
        return Err(bad());
    }
    let mut fp = [0u8; 32];
    for (i, byte) in fp.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&digits[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(fp)
}

/// What a server presents: a certificate chain and its key.
#[derive(Debug)]
pub struct ServerIdentity {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

impl ServerIdentity {
    /// A fresh self-signed certificate for the given names (e.g. `localhost`, an IP).
    pub fn self_signed(names: &[String]) -> Result<ServerIdentity, TlsError> {
        let certified = rcgen::generate_simple_self_signed(names.to_vec())?;
        Ok(ServerIdentity {
            chain: vec![certified.cert.der().clone()],
            key: PrivatePkcs8KeyDer::from(certified.key_pair.serialize_der()).into(),
        })
    }

    /// A certificate chain and private key from PEM files.
    pub fn from_pem_files(cert: &Path, key: &Path) -> Result<ServerIdentity, TlsError> {
        let cert_err = |reason: String| TlsError::CertFile {
            path: cert.display().to_string(),
            reason,
        };
        let chain = CertificateDer::pem_file_iter(cert)
            .map_err(|e| cert_err(e.to_string()))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| cert_err(e.to_string()))?;
        if chain.is_empty() {
            return Err(cert_err("no certificate found".into()));
        }
        let key = PrivateKeyDer::from_pem_file(key).map_err(|e| TlsError::KeyFile {
            path: key.display().to_string(),
            reason: e.to_string(),
        })?;
        Ok(ServerIdentity { chain, key })
    }

    /// Fingerprint of the leaf certificate.
    pub fn fingerprint(&self) -> Fingerprint {
        fingerprint(&self.chain[0])
    }

    pub(crate) fn rustls_config(
        &self,
        alpns: Vec<Vec<u8>>,
    ) -> Result<rustls::ServerConfig, TlsError> {
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_no_client_auth()
            .with_single_cert(self.chain.clone(), self.key.clone_key())?;
        config.alpn_protocols = alpns;
        Ok(config)
    }
}

/// How a client decides to trust the server's certificate.
#[derive(Debug, Clone)]
pub enum Trust {
    /// Only a certificate with this SHA-256 fingerprint (self-signed servers).
    Fingerprint(Fingerprint),
    /// Certificates chaining to these roots (e.g. a CA file).
    Roots(Arc<rustls::RootCertStore>),
    /// Anything. Only for tests and closed networks.
    Insecure,
}

impl Trust {
    /// Roots from a PEM file of CA certificates.
    pub fn from_ca_file(path: &Path) -> Result<Trust, TlsError> {
        let err = |reason: String| TlsError::CertFile {
            path: path.display().to_string(),
            reason,
        };
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_file_iter(path).map_err(|e| err(e.to_string()))? {
            roots
                .add(cert.map_err(|e| err(e.to_string()))?)
                .map_err(|e| err(e.to_string()))?;
        }
        if roots.is_empty() {
            return Err(err("no CA certificate found".into()));
        }
        Ok(Trust::Roots(Arc::new(roots)))
    }

    /// How the elements' TLS properties choose: a pinned fingerprint, else the CAs of a
    /// file, else anything (`insecure`), else the system's root CAs.
    pub fn choose(
        fingerprint: Option<&str>,
        ca_file: Option<&Path>,
        insecure: bool,
    ) -> Result<Trust, TlsError> {
        match (fingerprint, ca_file, insecure) {
            (Some(fp), _, _) => Ok(Trust::Fingerprint(parse_fingerprint(fp)?)),
            (None, Some(ca), _) => Trust::from_ca_file(ca),
            (None, None, true) => Ok(Trust::Insecure),
            (None, None, false) => Trust::system_roots(),
        }
    }

    /// The system's root CAs (on Debian, the ca-certificates bundle; `SSL_CERT_FILE` or
    /// `SSL_CERT_DIR` replace them).
    pub fn system_roots() -> Result<Trust, TlsError> {
        let found = rustls_native_certs::load_native_certs();
        let mut roots = rustls::RootCertStore::empty();
        let (added, _) = roots.add_parsable_certificates(found.certs);
        if added == 0 {
            let reason = match found.errors.first() {
                Some(e) => e.to_string(),
                None => "no certificate found".into(),
            };
            return Err(TlsError::CertFile {
                path: "the system's root CAs".into(),
                reason,
            });
        }
        Ok(Trust::Roots(Arc::new(roots)))
    }

    pub(crate) fn rustls_config(
        &self,
        alpns: Vec<Vec<u8>>,
    ) -> Result<rustls::ClientConfig, TlsError> {
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])?;
        let mut config = match self {
            Trust::Roots(roots) => builder
                .with_root_certificates(roots.clone())
                .with_no_client_auth(),
            Trust::Fingerprint(fp) => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(PinnedVerifier::new(Some(*fp))))
                .with_no_client_auth(),
            Trust::Insecure => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(PinnedVerifier::new(None)))
                .with_no_client_auth(),
        };
        config.alpn_protocols = alpns;
        Ok(config)
    }
}

/// Accepts a server certificate by fingerprint (or any, when none is pinned), while still
/// checking the handshake signature so the peer proves it holds the key.
#[derive(Debug)]
struct PinnedVerifier {
    pinned: Option<Fingerprint>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl PinnedVerifier {
    fn new(pinned: Option<Fingerprint>) -> PinnedVerifier {
        PinnedVerifier {
            pinned,
            algorithms: provider().signature_verification_algorithms,
        }
    }
}

impl ServerCertVerifier for PinnedVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.pinned {
            Some(fp) if fp != fingerprint(end_entity) => Err(rustls::Error::General(format!(
                "server certificate fingerprint {} does not match the pinned {}",
                fingerprint_hex(&fingerprint(end_entity)),
                fingerprint_hex(&fp)
            ))),
            _ => Ok(ServerCertVerified::assertion()),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_round_trip_through_hex() {
        let id = ServerIdentity::self_signed(&["localhost".into()]).unwrap();
        let fp = id.fingerprint();
        let hex = fingerprint_hex(&fp);
        assert_eq!(hex.len(), 64);
        assert_eq!(parse_fingerprint(&hex).unwrap(), fp);
        let colons: Vec<String> = fp.iter().map(|b| format!("{b:02X}")).collect();
        assert_eq!(parse_fingerprint(&colons.join(":")).unwrap(), fp);
        assert!(parse_fingerprint("abc").is_err());
        assert!(parse_fingerprint(&"zz".repeat(32)).is_err());
        assert!(parse_fingerprint(&"é".repeat(32)).is_err());
    }

    #[test]
    fn pem_files_load_and_bad_paths_are_named() {
        let certified = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let dir = std::env::temp_dir().join(format!("moq-tls-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
        std::fs::write(&cert, certified.cert.pem()).unwrap();
        std::fs::write(&key, certified.key_pair.serialize_pem()).unwrap();
        let id = ServerIdentity::from_pem_files(&cert, &key).unwrap();
        assert_eq!(id.fingerprint(), fingerprint(certified.cert.der()));
        assert!(matches!(Trust::from_ca_file(&cert), Ok(Trust::Roots(_))));
        let missing = dir.join("missing.pem");
        let err = ServerIdentity::from_pem_files(&missing, &key).unwrap_err();
        assert!(err.to_string().contains("missing.pem"), "{err}");
        let err = ServerIdentity::from_pem_files(&cert, &cert).unwrap_err();
        assert!(matches!(err, TlsError::KeyFile { .. }), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
