//! A relay that requires a JWT.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use crate::{Relay, ours};
use gst::prelude::*;

/// `moq` (moq-cli, whose `moq auth` makes keys and tokens and answers a relay's auth
/// requests), from `MOQ_CLI`, `PATH` or where `pipelines/install-moq-relay.sh` puts it.
fn moq_cli() -> PathBuf {
    std::env::var_os("MOQ_CLI")
        .map(PathBuf::from)
        .into_iter()
        .chain(
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/moqsink-tools/bin/moq")),
        )
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "moq (moq-cli) not found: run pipelines/install-moq-relay.sh (pipelines/test.sh does), \
                 or set MOQ_CLI to the binary"
            )
        })
}

/// A relay that requires a JWT: `moq auth serve` checks every session's token with a key
/// of its own, and the relay asks it (`--auth-url`).
struct JwtRelay {
    relay: Relay,
    auth: Child,
    dir: PathBuf,
}

impl JwtRelay {
    fn start() -> JwtRelay {
        let dir = scratch_dir("moq-jwt-test");
        let key = dir.join("key.jwk");
        let status = Command::new(moq_cli())
            .args(["auth", "generate", "--out"])
            .arg(&key)
            .status()
            .expect("moq auth generate runs");
        assert!(status.success(), "moq auth generate");
        // On a unix socket in the scratch directory: no port to choose.
        let socket = dir.join("auth.sock");
        let auth = Command::new(moq_cli())
            .args(["auth", "serve", "--listen"])
            .arg(format!("unix:{}", socket.display()))
            .arg("--key")
            .arg(&key)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moq auth serve starts");
        let deadline = Instant::now() + WAIT;
        while std::os::unix::net::UnixStream::connect(&socket).is_err() {
            assert!(Instant::now() < deadline, "moq auth serve did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        let relay =
            Relay::start_with_args(&["--auth-url", &format!("unix://{}", socket.display())]);
        JwtRelay { relay, auth, dir }
    }

    /// A token for broadcasts under `root`, signed with `key` (this relay's, or another),
    /// valid until `expires` (seconds since the UNIX epoch) if given.
    fn token(&self, root: &str, key: Option<&Path>, expires: Option<u64>) -> String {
        let own = self.dir.join("key.jwk");
        let expiry = expires.map(|at| ["--expires".to_owned(), at.to_string()]);
        let out = Command::new(moq_cli())
            .args([
                "auth",
                "sign",
                "--root",
                root,
                "--publish",
                "**",
                "--subscribe",
                "**",
                "--key",
            ])
            .arg(key.unwrap_or(&own))
            .args(expiry.iter().flatten())
            .output()
            .expect("moq auth sign runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    fn url(&self, path: &str) -> String {
        format!("moqt://127.0.0.1:{}{path}", self.relay.port)
    }
}

impl Drop for JwtRelay {
    fn drop(&mut self) {
        let _ = self.auth.kill();
        let _ = self.auth.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn a_relay_that_requires_a_jwt_plays_with_a_valid_token_and_refuses_others() {
    let relay = JwtRelay::start();
    let token = relay.token("demo", None, None);
    let pin = format!("tls-fingerprint={}", relay.relay.fingerprint);
    // The token as a property on the publisher, in the URL's query on the player.
    let _sender = Sender::through_relay(&ours(format!(
        "url={} {pin} auth-token={token}",
        relay.url("/demo/show")
    )));
    let receiver = Receiver::start(&ours(format!(
        "url={}?jwt={token} {pin}",
        relay.url("/demo/show")
    )));
    receiver.wait_frames(24, WAIT).expect("a valid token plays");

    // Another key's token, and none: refused with an error that says so.
    let stranger = relay.dir.join("stranger.jwk");
    let status = Command::new(moq_cli())
        .args(["auth", "generate", "--out"])
        .arg(&stranger)
        .status()
        .unwrap();
    assert!(status.success());
    let forged = relay.token("demo", Some(&stranger), None);
    for (what, properties) in [
        (
            "a token of another key",
            ours(format!(
                "url={} {pin} auth-token={forged} media-timeout=3000",
                relay.url("/demo/show")
            )),
        ),
        (
            "no token",
            ours(format!(
                "url={} {pin} media-timeout=3000",
                relay.url("/demo/show")
            )),
        ),
    ] {
        let started = Instant::now();
        let refused = Receiver::start(&properties);
        let err = wait_eos(&refused.pipeline, WAIT).expect_err("an error, not EOS");
        let took = started.elapsed();
        eprintln!("{what}: after {took:?}: {err}");
        assert!(
            err.to_lowercase().contains("unauthorized") || err.to_lowercase().contains("refused"),
            "{what}: {err}"
        );
        assert!(
            err.contains("set auth-token"),
            "{what}: the error says what to do: {err}"
        );
        // A refusal is not retried (media-timeout is 3 s here).
        assert!(
            took < Duration::from_secs(2),
            "{what}: refused after {took:?}"
        );
        if what == "no token" {
            // Through playbin too: the URI names the relay, and carries no token.
            let player = playbin(&format!("{}?{pin}", relay.url("/demo/show")))
                .downcast::<gst::Pipeline>()
                .unwrap();
            let started = Instant::now();
            let _ = player.set_state(gst::State::Playing);
            let err = wait_eos(&player, WAIT).expect_err("an error, not EOS");
            let took = started.elapsed();
            player.set_state(gst::State::Null).unwrap();
            eprintln!("{what}, playbin: after {took:?}: {err}");
            assert!(err.contains("set auth-token"), "playbin: {err}");
            assert!(
                took < Duration::from_secs(2),
                "playbin: refused after {took:?}"
            );
        }
        let sender = Sender::through_relay(&properties.replace(" media-timeout=3000", ""));
        let bus = sender.pipeline.bus().unwrap();
        let err = wait_bus(&bus, WAIT, |_| None::<()>).expect_err("the publisher is refused");
        eprintln!("{what}, publishing: {err}");
    }
}

/// moq-relay closes a session when its token expires. A fresh token set on both elements
/// while they play is presented on new sessions that take over before the old ones go:
/// no reconnect, no freeze, every frame once. A viewer whose token expires with no new
/// one ends with the relay's refusal, naming the property to set.
#[test]
fn a_fresh_token_set_while_playing_outlives_the_one_that_expires() {
    let relay = JwtRelay::start();
    let pin = format!("tls-fingerprint={}", relay.relay.fingerprint);
    let expires = unix_now().as_secs() + 8;
    let expiring = relay.token("demo", None, Some(expires));
    let sender = Sender::through_relay(&ours(format!(
        "url={} {pin} auth-token={expiring}",
        relay.url("/demo/show")
    )));
    let published_moves = crate::count_messages(&sender.pipeline, "moq-moved");
    wait_announced(&sender.sink);
    let viewer = Receiver::start(&ours(format!(
        "url={} {pin} auth-token={expiring} media-timeout=30000",
        relay.url("/demo/show")
    )));
    let abandoned = Receiver::start(&ours(format!(
        "url={} {pin} auth-token={expiring} media-timeout=30000",
        relay.url("/demo/show")
    )));
    viewer.wait_frames(24, WAIT).expect("plays");
    abandoned.wait_frames(24, WAIT).expect("plays");

    // Three seconds before the old tokens expire, fresh ones.
    let renew_at = Duration::from_secs(expires - 3);
    std::thread::sleep(renew_at.saturating_sub(unix_now()));
    let fresh = relay.token("demo", None, None);
    let renewed = unix_now();
    sender.sink.set_property("auth-token", &fresh);
    let src = viewer.pipeline.by_name("src").expect("moqsrc");
    src.set_property("auth-token", &fresh);

    // The relay enforces the expiry (the viewer left with it ends), and 3 s later the
    // other plays on.
    let err = wait_eos(&abandoned.pipeline, WAIT).expect_err("the expired viewer ends");
    let ended = unix_now();
    let before = viewer.frames().len();
    viewer
        .wait_frames(before + 24 * 3, WAIT)
        .expect("plays on past the old token's expiry");
    let messages = viewer.messages_where(|_| true);
    viewer.pipeline.set_state(gst::State::Null).unwrap();
    abandoned.pipeline.set_state(gst::State::Null).unwrap();
    sender.pipeline.set_state(gst::State::Null).unwrap();
    let frames = viewer.frames();
    let longest = longest_pause(&frames, renewed);
    eprintln!(
        "{} frames; longest pause after the renewal {longest:?}; viewer messages {messages:?}; \
         the expired viewer ended {:.1} s after its token's expiry: {err}",
        frames.len(),
        ended.as_secs_f64() - expires as f64
    );
    assert!(
        messages.iter().any(|m| m == "moq-moved reason=auth-token"),
        "the viewer moved: {messages:?}"
    );
    assert!(
        *published_moves.lock().unwrap() > 0,
        "the publisher moved to a session with the fresh token"
    );
    assert_played_through(&frames, &messages, renewed, Duration::from_millis(500));
    assert!(
        err.contains("set auth-token"),
        "the error says what to do: {err}"
    );
}

/// A token set while the relay is away is the one the publisher comes back with, its old
/// one having expired meanwhile.
#[test]
fn a_publisher_comes_back_with_the_token_set_while_the_relay_was_away() {
    let mut relay = JwtRelay::start();
    let pin = format!("tls-fingerprint={}", relay.relay.fingerprint);
    let expires = unix_now().as_secs() + 5;
    let expiring = relay.token("demo", None, Some(expires));
    let sender = Sender::through_relay(&ours(format!(
        "url={} {pin} auth-token={expiring}",
        relay.url("/demo/show")
    )));
    let lost = crate::count_messages(&sender.pipeline, "moq-disconnected");
    wait_announced(&sender.sink);
    relay.relay.kill();
    // Once the publisher knows the relay is gone (QUIC's idle timeout), a fresh token.
    wait_until("the publisher lost the relay", || *lost.lock().unwrap() > 0);
    let fresh = relay.token("demo", None, None);
    sender.sink.set_property("auth-token", &fresh);
    // Back after the old token expired.
    let back_at = Duration::from_secs(expires + 1);
    std::thread::sleep(back_at.saturating_sub(unix_now()));
    relay.relay.spawn();
    let viewer = Receiver::start(&ours(format!(
        "url={}?jwt={fresh} {pin} media-timeout=20000",
        relay.url("/demo/show")
    )));
    let played = viewer.wait_frames(24, WAIT);
    let bus = sender.pipeline.bus().unwrap();
    let sender_error = wait_bus(&bus, Duration::from_millis(10), |_| None::<()>).err();
    viewer.pipeline.set_state(gst::State::Null).unwrap();
    sender.pipeline.set_state(gst::State::Null).unwrap();
    played.unwrap_or_else(|e| {
        panic!("the publisher is back with the fresh token: {e}; {sender_error:?}")
    });
}
