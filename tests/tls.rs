//! Trust like a real client: without a pinned fingerprint, a CA file or `tls-insecure`,
//! moqsrc verifies the server against the system's root CAs. A test CA stands in for an
//! installed root: the player runs as its own `gst-launch-1.0` process whose
//! `SSL_CERT_FILE` names the CA (how OpenSSL-style stores are pointed elsewhere), so the
//! test process's environment is left alone.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::*;
use gst::glib;
use gst::prelude::*;

/// A CA, and a server certificate for 127.0.0.1 and localhost signed by it, in `dir`:
/// (ca.pem, cert.pem, key.pem).
fn test_ca(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "moqsink test CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let server_key = rcgen::KeyPair::generate().unwrap();
    let server = rcgen::CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()])
        .unwrap()
        .signed_by(&server_key, &ca, &ca_key)
        .unwrap();
    let paths = (
        dir.join("ca.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    );
    std::fs::write(&paths.0, ca.pem()).unwrap();
    std::fs::write(&paths.1, server.pem()).unwrap();
    std::fs::write(&paths.2, server_key.serialize_pem()).unwrap();
    paths
}

fn scratch() -> Scratch {
    Scratch::new("moq-tls-test")
}

/// Plays `url` in a `gst-launch-1.0` process whose system roots are `roots`, until 30
/// frames came or it failed; returns the frames its sink got and what it printed (with
/// moqsrc's log of each connection attempt).
fn play_with_system_roots(url: &str, roots: &Path) -> (usize, String) {
    let text = run_for(
        Command::new("gst-launch-1.0")
            .args([
                "-m",
                "moqsrc",
                &format!("url={url}"),
                "media-timeout=10000",
                "!",
                "h264parse",
                "!",
                "identity",
                "eos-after=30",
                "!",
                "fakesink",
                "silent=false",
                "-v",
            ])
            .env("GST_PLUGIN_PATH", plugin_dir())
            .env("GST_DEBUG", "moqsrc:4")
            .env("SSL_CERT_FILE", roots)
            .env_remove("SSL_CERT_DIR"),
        Duration::from_secs(20),
    );
    let frames = text.matches("chain   ******* (fakesink0:sink)").count();
    (frames, text)
}

#[test]
fn a_server_whose_certificate_chains_to_a_system_root_is_trusted_without_a_pin() {
    let dir = scratch();
    let (ca, cert, key) = test_ca(&dir);
    let sender = Sender::start(&format!(
        "tls-cert-file={} tls-key-file={}",
        cert.display(),
        key.display()
    ));
    let (frames, text) = play_with_system_roots(&sender.url(), &ca);
    eprintln!("with the test CA as the system's root: {frames} frames");
    assert!(frames >= 24, "plays without tls-insecure: {frames}\n{text}");
    // The same server when the system does not trust it: refused, with the reason.
    let other_dir = scratch();
    let other = other_dir.join("other.pem");
    std::fs::write(&other, {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.self_signed(&key).unwrap().pem()
    })
    .unwrap();
    let (frames, text) = play_with_system_roots(&sender.url(), &other);
    assert_eq!(frames, 0, "an untrusted certificate plays nothing");
    assert!(
        text.contains("UnknownIssuer") || text.contains("certificate"),
        "the error says why: {text}"
    );
}

#[test]
fn a_ca_file_is_trusted_by_moqsrc_too() {
    let dir = scratch();
    let (ca, cert, key) = test_ca(&dir);
    let sender = Sender::start(&format!(
        "tls-cert-file={} tls-key-file={}",
        cert.display(),
        key.display()
    ));
    let receiver = Receiver::start(&format!(
        "url={} tls-ca-file={}",
        sender.url(),
        ca.display()
    ));
    receiver
        .wait_frames(24, WAIT)
        .expect("plays with the CA file");
}

#[test]
fn the_certificate_fingerprint_is_read_only_and_exists_from_ready_on() {
    init();
    let sink = gst::ElementFactory::make("moqsink")
        .property("listen", "127.0.0.1:0")
        .build()
        .unwrap();
    // What gst-inspect-1.0 shows: no certificate is made just to be displayed.
    assert_eq!(
        sink.property::<Option<String>>("tls-cert-fingerprint"),
        None
    );
    assert_eq!(sink.property::<Option<String>>("tls-fingerprint"), None);
    sink.set_state(gst::State::Ready).unwrap();
    let fingerprint = sink
        .property::<Option<String>>("tls-cert-fingerprint")
        .expect("a certificate in READY");
    assert_eq!(fingerprint.len(), 64);
    assert_eq!(
        sink.property::<Option<String>>("certificate-fingerprint"),
        Some(fingerprint.clone()),
        "the old name reads the same"
    );
    assert!(
        sink.find_property("tls-cert-fingerprint")
            .is_some_and(|p| { !p.flags().contains(glib::ParamFlags::WRITABLE) })
    );
    sink.set_state(gst::State::Null).unwrap();
}
