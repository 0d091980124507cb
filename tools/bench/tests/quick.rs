//! `moq-bench --quick` end to end: every output is there and consistent with the others.

use std::collections::HashSet;
use std::process::Command;

#[test]
fn quick_mode_produces_complete_consistent_outputs() {
    let out = std::env::temp_dir().join(format!("moq-bench-quick-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let status = Command::new(env!("CARGO_BIN_EXE_moq-bench"))
        .args(["--quick", "--out"])
        .arg(&out)
        .status()
        .expect("moq-bench runs");
    assert!(status.success(), "moq-bench --quick failed");

    let summary: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let systems: HashSet<&str> = summary
        .iter()
        .map(|s| s["system"].as_str().unwrap())
        .collect();
    assert_eq!(
        systems,
        HashSet::from([
            "moq-baseline",
            "moq-deprioritize-b",
            "moq-skip-gops",
            "moq-combined"
        ])
    );
    for s in &summary {
        let system = s["system"].as_str().unwrap();
        let csv =
            std::fs::read_to_string(out.join(format!("frames/{system}__quick__0.csv"))).unwrap();
        let rows: Vec<Vec<&str>> = csv
            .lines()
            .skip(1)
            .map(|l| l.split(',').collect())
            .collect();
        // Every frame the sender handed over has a row, ids contiguous from 0.
        for (i, row) in rows.iter().enumerate() {
            assert_eq!(row[0].parse::<usize>().unwrap(), i, "{system}: frame ids");
            assert!(["key", "reference", "non-reference"].contains(&row[1]));
        }
        assert!(
            rows.len() > 24 * 20,
            "{system}: only {} frames sent",
            rows.len()
        );
        let first = rows
            .iter()
            .position(|r| !r[5].is_empty())
            .expect("something rendered");
        let rendered = rows[first..].iter().filter(|r| !r[5].is_empty()).count();
        assert_eq!(
            s["frames_rendered"].as_u64().unwrap() as usize,
            rendered,
            "{system}"
        );
        assert_eq!(
            s["frames_captured"].as_u64().unwrap() as usize,
            rows.len() - first,
            "{system}"
        );
        assert!(
            rendered > rows.len() / 2,
            "{system}: rendered {rendered} of {}",
            rows.len()
        );
        // Nothing renders before it arrives, nor arrives before it was sent.
        for r in &rows {
            if let (Ok(sent), Ok(arrived)) = (r[3].parse::<i64>(), r[4].parse::<i64>()) {
                assert!(
                    arrived >= sent,
                    "{system}: frame {} arrived before it was sent",
                    r[0]
                );
                if let Ok(shown) = r[5].parse::<i64>() {
                    assert!(
                        shown >= arrived,
                        "{system}: frame {} rendered before it arrived",
                        r[0]
                    );
                }
            }
        }
        let p50 = s["latency_p50_ms"].as_f64().unwrap();
        assert!(p50 > 0.0 && p50 <= s["latency_p95_ms"].as_f64().unwrap());
        assert!(out.join(format!("links/{system}__quick__0.csv")).is_file());
    }
    for plot in ["latency_quick.png", "bitrate_quick.png", "ccdf_quick.png"] {
        let bytes = std::fs::read(out.join("plots").join(plot)).unwrap();
        assert!(bytes.starts_with(b"\x89PNG"), "{plot}");
    }
    let report = std::fs::read_to_string(out.join("BENCHMARKS.md")).unwrap();
    assert!(report.contains("moq-combined") && report.contains("### quick"));
    std::fs::remove_dir_all(&out).unwrap();
}
