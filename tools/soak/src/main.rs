//! `moq-soak`: resource-exhaustion soak checks of moqsink and moqsrc.
//!
//! ```text
//! moq-soak run stalled-subscriber [--seconds 600] [--delivery MODE] [--reconnect] ...
//! moq-soak run paused-receiver [--seconds 60] ...
//! moq-soak run churn [--cycles 1000] ...
//! moq-soak run mixed [--seconds 3600] ...
//! moq-soak send [--port P | --url URL] [--moqsink-props "..."]   (child role)
//! moq-soak receive --url URL --fingerprint HEX            (child role)
//! ```
//! Every scenario prints a row every 10 s and a final `summary` line with every figure,
//! and exits with 1 if a bound is violated (2 if the run itself failed).

use std::path::PathBuf;
use std::process::ExitCode;

use moq_soak::mixed::{self, MixedOptions};
use moq_soak::scenario::{self, ChurnOptions, PausedOptions, StalledOptions};
use moq_testkit::{media, roles};

const USAGE: &str = "usage:
  moq-soak run stalled-subscriber [--seconds S] [--delivery MODE] [--warmup S] [--reconnect]
                                  [--no-peer] [--moqsink-props \"K=V ...\"]
                                  [--max-rss-growth-mb MB] [--min-healthy-pct P]
      A subscriber that subscribes and never reads any data stream, for S seconds (default
      600), beside a healthy moqsrc subscriber. The sender runs with subscriber-stall-timeout=3600000
      so the backlog budget alone bounds its memory; --reconnect keeps the default timeout
      and makes the peer come back and stall again after every disconnect; --no-peer is the
      same run without the stalled peer, for comparison. MODE: baseline
      (default), deprioritize-b, skip-gops, combined. Bounds: sender RSS growth after the
      warm-up (default 20 s) < 20 MB, healthy subscriber keeps >= 99% of the frames.

  moq-soak run paused-receiver [--seconds S] [--play-seconds S] [--after-seconds S]
                               [--max-rss-growth-mb MB] [--max-resume-latency-ms MS]
                               [--max-resume-wait-ms MS]
      A receiver (moqsrc ! h264parse ! avdec_h264 ! fakesink sync=true, its own process)
      plays 10 s, is PAUSED for S seconds (default 60), plays 10 s. Bounds: receiver RSS
      growth < 10 MB; the first buffer after PLAY is a DISCONT keyframe less than 1500 ms old
      (the live edge), output within 5000 ms of PLAY.

  moq-soak run churn [--cycles N] [--warmup-cycles N] [--concurrency N] [--seconds S]
                     [--warmup S] [--max-rss-growth-mb MB]
      N (default 1000) connect / subscribe catalog+video / take one object / drop cycles,
      4 at a time, after 10 s of streaming (--warmup) and 200 warm-up cycles, beside a
      continuous moqsrc subscriber (moqsink delivery=baseline, moqsrc latency=500, so
      that only the churn can cost it a frame); S caps the time they may take (default
      1800). Bounds: sender RSS growth over the baseline taken after the warm-up cycles
      < 5 MB; the continuous subscriber loses no frame.

  moq-soak run mixed [--seconds S] [--restart-every S] [--warmup S] [--congested-kbit K]
                     [--churn-pause-ms MS] [--max-rss-growth-mb MB] [--min-viewer-pct P]
      Everything at once through three moq-relay nodes (MOQ_RELAY, else
      pipelines/install-moq-relay.sh) for S seconds (default 3600): the sender publishes to
      node 1 and a continuous viewer plays from node 2 (each with the other nodes as
      backup-urls); nodes 1 and 2 are restarted in turn every --restart-every s (default
      300; SIGTERM, GOAWAY, an 8 s drain, started again on their port). On node 0, which
      stays up: a connect/subscribe/drop cycle every --churn-pause-ms (default 1000), a
      subscriber that stalls and comes back, a viewer behind a K kbit/s link (default 400).
      Bounds: RSS growth after the warm-up (default 120 s) of the sender and of node 0
      < 10 MB; the continuous viewer keeps >= 99.9% of the frames, none twice or out of
      order; the congested viewer plays; at most 1 churn cycle in 10 fails.

  moq-soak send [--port P | --url URL] [--moqsink-props \"K=V ...\"]
  moq-soak receive --url URL --fingerprint HEX [--moqsrc-props \"K=V ...\"]
      Child roles (the scenarios start them): a live ~600 kbit/s 24 fps H.264 stream into
      moqsink on 127.0.0.1:P (0: any port) or publishing to URL, and a decoding moqsrc receiver. Both print
      line-based reports on stdout and stop when stdin closes.

Figures: RSS is VmRSS in MB (10^6 bytes). Exit code: 0 all bounds held, 1 a bound was
violated, 2 the run failed. MOQ_SOAK_SENDER_WRAPPER=\"heaptrack -o FILE\" (for example)
starts the sender under that command, to look into its heap (RSS figures are then the
wrapper's).";

/// Command-line options as `--name value` pairs and `--flag`s.
struct Args {
    words: Vec<String>,
}

impl Args {
    fn value(&mut self, name: &str) -> Result<Option<String>, String> {
        let Some(i) = self.words.iter().position(|w| w == name) else {
            return Ok(None);
        };
        if i + 1 >= self.words.len() {
            return Err(format!("{name} needs a value"));
        }
        let value = self.words.remove(i + 1);
        self.words.remove(i);
        Ok(Some(value))
    }

    fn parsed<T: std::str::FromStr>(&mut self, name: &str, default: T) -> Result<T, String> {
        match self.value(name)? {
            Some(v) => v.parse().map_err(|_| format!("{name}: cannot parse {v:?}")),
            None => Ok(default),
        }
    }

    fn flag(&mut self, name: &str) -> bool {
        let before = self.words.len();
        self.words.retain(|w| w != name);
        self.words.len() != before
    }

    fn finish(self) -> Result<(), String> {
        match self.words.first() {
            Some(w) => Err(format!("unexpected argument {w:?}")),
            None => Ok(()),
        }
    }
}

enum Outcome {
    Passed,
    Violated,
}

fn exe() -> Result<PathBuf, String> {
    std::env::current_exe().map_err(|e| format!("cannot locate moq-soak itself: {e}"))
}

fn run(mut words: Vec<String>) -> Result<Outcome, String> {
    if words.is_empty() || words.iter().any(|w| w == "--help" || w == "-h") {
        println!("{USAGE}");
        return Ok(Outcome::Passed);
    }
    let command = words.remove(0);
    match command.as_str() {
        "send" => {
            let mut args = Args { words };
            let port = args.parsed("--port", 0u16)?;
            let url = args.value("--url")?;
            let props = args.value("--moqsink-props")?.unwrap_or_default();
            args.finish()?;
            match url {
                Some(url) => roles::send_with(&format!("url={url} {props}"))?,
                None => roles::send(port, &props)?,
            }
            Ok(Outcome::Passed)
        }
        "receive" => {
            let mut args = Args { words };
            let url = args.value("--url")?.ok_or("receive needs --url")?;
            let fingerprint = args
                .value("--fingerprint")?
                .ok_or("receive needs --fingerprint")?;
            let props = args.value("--moqsrc-props")?.unwrap_or_default();
            args.finish()?;
            roles::receive(&url, &fingerprint, &props)?;
            Ok(Outcome::Passed)
        }
        "run" => {
            if words.is_empty() {
                return Err(
                    "run needs a scenario: stalled-subscriber, paused-receiver, churn, mixed"
                        .into(),
                );
            }
            let scenario = words.remove(0);
            let mut args = Args { words };
            media::init()?;
            let passed = match scenario.as_str() {
                "stalled-subscriber" => {
                    let d = StalledOptions::new(exe()?);
                    let opts = StalledOptions {
                        seconds: args.parsed("--seconds", d.seconds)?,
                        delivery: args.parsed("--delivery", d.delivery.clone())?,
                        warmup: args.parsed("--warmup", d.warmup)?,
                        reconnect: args.flag("--reconnect"),
                        no_peer: args.flag("--no-peer"),
                        moqsink_props: args.parsed("--moqsink-props", d.moqsink_props.clone())?,
                        max_rss_growth_mb: args
                            .parsed("--max-rss-growth-mb", d.max_rss_growth_mb)?,
                        min_healthy_pct: args.parsed("--min-healthy-pct", d.min_healthy_pct)?,
                        ..d
                    };
                    args.finish()?;
                    scenario::stalled_subscriber(&opts)?.passed()
                }
                "paused-receiver" => {
                    let d = PausedOptions::new(exe()?);
                    let opts = PausedOptions {
                        pause_seconds: args.parsed("--seconds", d.pause_seconds)?,
                        play_seconds: args.parsed("--play-seconds", d.play_seconds)?,
                        after_seconds: args.parsed("--after-seconds", d.after_seconds)?,
                        max_rss_growth_mb: args
                            .parsed("--max-rss-growth-mb", d.max_rss_growth_mb)?,
                        max_resume_latency_ms: args
                            .parsed("--max-resume-latency-ms", d.max_resume_latency_ms)?,
                        max_resume_wait_ms: args
                            .parsed("--max-resume-wait-ms", d.max_resume_wait_ms)?,
                        ..d
                    };
                    args.finish()?;
                    scenario::paused_receiver(&opts)?.passed()
                }
                "churn" => {
                    let d = ChurnOptions::new(exe()?);
                    let opts = ChurnOptions {
                        cycles: args.parsed("--cycles", d.cycles)?,
                        warmup_cycles: args.parsed("--warmup-cycles", d.warmup_cycles)?,
                        concurrency: args.parsed("--concurrency", d.concurrency)?,
                        warmup: args.parsed("--warmup", d.warmup)?,
                        max_seconds: args.parsed("--seconds", d.max_seconds)?,
                        max_rss_growth_mb: args
                            .parsed("--max-rss-growth-mb", d.max_rss_growth_mb)?,
                        ..d
                    };
                    args.finish()?;
                    scenario::churn(&opts)?.passed()
                }
                "mixed" => {
                    let d = MixedOptions::new(exe()?);
                    let opts = MixedOptions {
                        seconds: args.parsed("--seconds", d.seconds)?,
                        restart_every: args.parsed("--restart-every", d.restart_every)?,
                        warmup: args.parsed("--warmup", d.warmup)?,
                        congested_kbit: args.parsed("--congested-kbit", d.congested_kbit)?,
                        churn_pause_ms: args.parsed("--churn-pause-ms", d.churn_pause_ms)?,
                        max_rss_growth_mb: args
                            .parsed("--max-rss-growth-mb", d.max_rss_growth_mb)?,
                        min_viewer_pct: args.parsed("--min-viewer-pct", d.min_viewer_pct)?,
                        ..d
                    };
                    args.finish()?;
                    mixed::mixed(&opts)?.passed()
                }
                other => return Err(format!("unknown scenario {other:?}\n\n{USAGE}")),
            };
            Ok(if passed {
                Outcome::Passed
            } else {
                Outcome::Violated
            })
        }
        other => Err(format!("unknown command {other:?}\n\n{USAGE}")),
    }
}

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(Outcome::Passed) => ExitCode::SUCCESS,
        Ok(Outcome::Violated) => ExitCode::from(1),
        Err(err) => {
            eprintln!("moq-soak: {err}");
            ExitCode::from(2)
        }
    }
}
