//! The shipped profiles parse and say what tools/linkem/README.md says they are.

use std::path::PathBuf;
use std::time::Duration;

use linkem::Profile;

fn load(name: &str) -> Profile {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../pipelines/profiles")
        .join(format!("{name}.json"));
    Profile::from_file(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// (duration s, rate kbit/s) of every step.
fn steps(p: &Profile) -> Vec<(f64, u64)> {
    p.steps()
        .iter()
        .map(|s| (s.duration.as_secs_f64(), s.rate_kbit))
        .collect()
}

#[test]
fn twitch_set_and_const_500_match_the_design() {
    let table: [(&str, Vec<(f64, u64)>); 6] = [
        (
            "CASCADE",
            vec![(30., 1200), (30., 800), (30., 400), (30., 800), (30., 1200)],
        ),
        (
            "INTRA_CASCADE",
            [1000, 800, 600, 400, 200, 400, 600, 800, 1000]
                .map(|r| (15., r))
                .to_vec(),
        ),
        ("SPIKE", vec![(10., 1200), (10., 300), (10., 800)]),
        ("SLOW_JITTERS", [(5., 500), (5., 1200)].repeat(3)),
        (
            "FAST_JITTERS",
            vec![
                (0.25, 500),
                (5., 1200),
                (0.1, 500),
                (1., 1200),
                (0.25, 500),
                (5., 1200),
            ],
        ),
        ("CONST_500", vec![(90., 500)]),
    ];
    for (name, want) in table {
        let p = load(&name.to_lowercase());
        assert_eq!(p.name(), name);
        assert_eq!(steps(&p), want, "{name}");
        assert!(!p.is_looped() && p.reverse().is_none(), "{name}");
        assert!(p.description().is_some_and(|d| !d.is_empty()), "{name}");
        assert!(p.steps().iter().all(|s| s.delay.is_zero() && s.loss == 0.0));
        // The queue holds 3 s at the lowest rate.
        let lowest = want.iter().map(|s| s.1).min().unwrap_or(0);
        assert_eq!(p.queue_bytes() as u64, lowest * 1000 / 8 * 3, "{name}");
    }
}

#[test]
fn loss_rtt_grid_is_complete_and_symmetric() {
    for loss in ["0", "0.0001", "0.001", "0.01"] {
        for rtt in [50u64, 100, 150] {
            let name = format!("loss{loss}_rtt{rtt}");
            let p = load(&name);
            assert_eq!(p.name(), name);
            assert!(p.description().is_some());
            let rev = p.reverse().expect("reverse direction");
            for dir in [&p, rev] {
                let [s] = dir.steps() else {
                    panic!("{name}: one step expected")
                };
                assert_eq!(s.rate_kbit, 0, "{name}: unconstrained");
                assert_eq!(s.delay, Duration::from_millis(rtt / 2), "{name}");
                assert_eq!(s.loss, loss.parse::<f64>().expect("number"), "{name}");
            }
        }
    }
}
