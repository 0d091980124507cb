//! Metrics of one run from its per-frame rows (docs/metrics.md). Pure: no clock, no I/O.

use std::collections::HashMap;

use moq_media::metrics::{InterarrivalJitter, TsDf, quantile};
use serde::Serialize;

/// Stall: no new picture for longer than this.
const STALL_US: i64 = 250_000;
/// Frame gap: more than two frame intervals (24 fps) without a picture, but no stall.
const GAP_US: i64 = 83_334;
/// OTDR budget.
const ON_TIME_US: i64 = 1_000_000;

/// The kind of a captured frame a live encoder did not encode (its rate control skipped
/// it to keep to the target): never sent, never shown, referenced by nothing.
pub const SKIPPED: &str = "skipped";

/// One frame of the reference stream, as the run saw it. Times in µs on one clock.
#[derive(Debug, Clone, PartialEq)]
pub struct FrameRow {
    pub id: u64,
    pub kind: &'static str,
    pub size: usize,
    /// When the sender was handed the frame.
    pub available_us: i64,
    /// When it reached the receiver's depacketizer output, if it did.
    pub arrived_us: Option<i64>,
    /// When the sink rendered it, if it did.
    pub rendered_us: Option<i64>,
    /// Its slices reached the decoder other than they were sent.
    pub damaged: bool,
    /// Systems that report their stages (ours): when QUIC took the frame's object at the
    /// sender, and when the receiver had it whole, before its reorder buffer.
    pub handed_off_us: Option<i64>,
    pub received_us: Option<i64>,
    /// Our receivers: when the frame reached moqsink (after a live encoder).
    pub published_us: Option<i64>,
}

/// Facts about a run that are not per frame.
#[derive(Debug, Clone, Default)]
pub struct RunFacts {
    pub system: String,
    pub profile: String,
    pub repetition: u32,
    /// Mean link rate over the run, kbit/s (0 = unlimited).
    pub link_kbit: f64,
    /// UDP payload bytes linkem forwarded, both directions.
    pub wire_bytes: u64,
    pub sender_cpu_s: f64,
    pub receiver_cpu_s: f64,
    /// Model latency (s) of each frame for an in-order stream, by frame, if computed.
    pub fluid_latency_s: Vec<f64>,
    /// Wall time (unix µs) at which the link's trace started (its first packet).
    pub trace_start_us: Option<i64>,
    /// The receiver buffering the system is configured with, ms (none to set: `None`).
    pub configured_latency_ms: Option<u32>,
    /// The latency the receiver's decoder reports, ms, where it was asked.
    pub decoder_latency_ms: Option<f64>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Summary {
    pub system: String,
    pub profile: String,
    pub repetition: u32,
    pub frames_captured: u64,
    pub frames_rendered: u64,
    /// Rendered frames whose picture can only have come from the bytes sent (see
    /// [`intact_pictures`]), and the rest of those rendered.
    pub frames_rendered_intact: u64,
    pub frames_rendered_damaged: u64,
    pub latency_mean_ms: f64,
    pub latency_p50_ms: f64,
    pub latency_p95_ms: f64,
    pub latency_p99_ms: f64,
    pub otdr_1s: f64,
    pub stalls: u64,
    pub stall_total_s: f64,
    pub frame_gaps: u64,
    pub capacity_efficiency: f64,
    pub stream_kbit: f64,
    /// Media bitrate of the frames rendered, kbit/s: what the viewer actually got.
    pub rendered_kbit: f64,
    pub jitter_ms: f64,
    pub ts_df_mean_ms: f64,
    pub ts_df_max_ms: f64,
    pub overhead: f64,
    pub cpu_us_per_frame_sender: f64,
    pub cpu_us_per_frame_receiver: f64,
    /// Mean measured latency ÷ mean fluid-model latency (in-order systems).
    pub fluid_ratio: Option<f64>,
    /// The receiver buffering the system is configured with, ms, if it has one to set.
    pub configured_latency_ms: Option<u32>,
    /// The latency the receiver's decoder reports, ms (its B-frame reordering).
    pub decoder_latency_ms: Option<f64>,
    /// Our receivers: mean and p95 latency from when each frame reached moqsink (after a
    /// live encoder, whose own delay the latency above counts), ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub published_latency_mean_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub published_latency_p95_ms: Option<f64>,
    /// Unix µs of the link trace's time 0, to place frames on the profile's rate steps.
    pub trace_start_us: Option<i64>,
    /// Systems with audio: how the audio played beside the video.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub av: Option<AvSummary>,
    /// Systems with renditions: what the viewer chose.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub abr: Option<AbrSummary>,
    /// Systems that report their stages: where the delay of the frames rendered went.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stages: Option<StageSummary>,
}

/// Quantiles (ms) of the stages of the delay of rendered frames (seed 004): queued at the
/// sender until QUIC took the object, in flight until the receiver had it whole, then in
/// the receiver's reorder buffer until it left for the decoder.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StageSummary {
    pub frames: u64,
    pub queued_p50_ms: f64,
    pub queued_p95_ms: f64,
    pub flight_p50_ms: f64,
    pub flight_p95_ms: f64,
    pub reorder_p50_ms: f64,
    pub reorder_p95_ms: f64,
}

/// The stages of the rendered frames that have all their times, if any do.
pub fn stage_summary(rows: &[FrameRow]) -> Option<StageSummary> {
    let (mut queued, mut flight, mut reorder) = (Vec::new(), Vec::new(), Vec::new());
    for r in rows.iter().filter(|r| r.rendered_us.is_some()) {
        let (Some(taken), Some(received), Some(left)) =
            (r.handed_off_us, r.received_us, r.arrived_us)
        else {
            continue;
        };
        queued.push(taken - r.available_us);
        flight.push(received - taken);
        reorder.push(left - received);
    }
    if queued.is_empty() {
        return None;
    }
    let ms = |v: &mut Vec<i64>, q: f64| quantile(v, q).map_or(f64::NAN, |us| us as f64 / 1000.0);
    Some(StageSummary {
        frames: queued.len() as u64,
        queued_p50_ms: ms(&mut queued, 0.5),
        queued_p95_ms: ms(&mut queued, 0.95),
        flight_p50_ms: ms(&mut flight, 0.5),
        flight_p95_ms: ms(&mut flight, 0.95),
        reorder_p50_ms: ms(&mut reorder, 0.5),
        reorder_p95_ms: ms(&mut reorder, 0.95),
    })
}

/// A frame's hand-off at the sender among `written` (when the sender wrote each object,
/// unix µs, with when QUIC took it): the one written first at or after the frame was
/// available, within `MATCH_US`. Frames are 41 ms apart and the sender writes an
/// object within a millisecond of being handed the frame, so the match is unique.
pub fn handoff_of(available_us: i64, written: &[(i64, i64)]) -> Option<i64> {
    const MATCH_US: i64 = 20_000;
    let at = written.partition_point(|(w, _)| *w < available_us);
    written
        .get(at)
        .filter(|(w, _)| w - available_us <= MATCH_US)
        .map(|(_, taken)| *taken)
}

/// The renditions a viewer played in one run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AbrSummary {
    pub switches_up: u64,
    pub switches_down: u64,
    /// The nominal bitrate of the rendition playing, averaged over time, kbit/s.
    pub rendition_kbit: f64,
}

/// What a viewer chose between `from_us` and `to_us`, from the rendition it started on and
/// each switch after (`timeline`: unix µs, the new rendition's nominal kbit/s; the first
/// entry is the start).
pub fn abr_summary(timeline: &[(i64, u32)], from_us: i64, to_us: i64) -> AbrSummary {
    let (mut up, mut down) = (0, 0);
    for w in timeline.windows(2) {
        match w[1].1.cmp(&w[0].1) {
            std::cmp::Ordering::Greater => up += 1,
            std::cmp::Ordering::Less => down += 1,
            std::cmp::Ordering::Equal => {}
        }
    }
    let mut weighted = 0.0;
    for (i, (at, kbit)) in timeline.iter().enumerate() {
        let end = timeline.get(i + 1).map_or(to_us, |next| next.0).min(to_us);
        let start = (*at).max(from_us);
        if end > start {
            weighted += f64::from(*kbit) * (end - start) as f64;
        }
    }
    let span = (to_us - from_us).max(1) as f64;
    AbrSummary {
        switches_up: up,
        switches_down: down,
        rendition_kbit: weighted / span,
    }
}

/// An audio hole longer than this is a gap (a lost 20 ms frame is not).
const AUDIO_GAP_US: i64 = 60_000;
/// Video and audio frames further apart than this in the sender's time are not a pair.
const PAIR_US: i64 = 50_000;
/// Pairs within this of the first video frame are not compared: audio takes the lead.
const SETTLE_US: i64 = 1_000_000;

/// One audio frame: its position in the track (from the publisher's first frame), and
/// its running time and duration, µs, on the side that saw it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AudioFrame {
    pub index: u64,
    pub pts_us: i64,
    pub duration_us: i64,
}

/// Audio beside video in one run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AvSummary {
    /// Audio frames the sender published from the first one the receiver output to the
    /// last, and how many of them the receiver output.
    pub audio_frames_sent: u64,
    pub audio_frames_output: u64,
    /// Holes in the audio the receiver output longer than 60 ms, and the longest, ms.
    pub audio_gaps: u64,
    pub audio_gap_longest_ms: f64,
    /// How much further apart (or closer) the receiver put a video frame and the audio
    /// frame nearest to it than the sender had them, ms: the worst and the 95th
    /// percentile of |skew| over the pairs compared.
    pub av_skew_max_ms: f64,
    pub av_skew_p95_ms: f64,
    pub av_pairs: u64,
}

/// A/V figures of a run: the audio the sender published and the receiver output, and
/// each video frame's running time at the sender and at the receiver, by frame id.
pub fn av_summary(
    sent_audio: &[AudioFrame],
    output_audio: &[AudioFrame],
    sent_video: &HashMap<u64, i64>,
    output_video: &HashMap<u64, i64>,
) -> AvSummary {
    let mut indices: Vec<u64> = output_audio.iter().map(|a| a.index).collect();
    indices.sort_unstable();
    indices.dedup();
    let sent = match (indices.first(), indices.last()) {
        (Some(first), Some(last)) => sent_audio
            .iter()
            .filter(|a| a.index >= *first && a.index <= *last)
            .count(),
        _ => 0,
    };
    let holes: Vec<i64> = output_audio
        .windows(2)
        .map(|w| w[1].pts_us - (w[0].pts_us + w[0].duration_us))
        .filter(|h| *h > AUDIO_GAP_US)
        .collect();
    // (sender time, receiver time) of every audio frame output, by sender time.
    let sent_pts: HashMap<u64, i64> = sent_audio.iter().map(|a| (a.index, a.pts_us)).collect();
    let mut audio: Vec<(i64, i64)> = output_audio
        .iter()
        .filter_map(|a| Some((*sent_pts.get(&a.index)?, a.pts_us)))
        .collect();
    audio.sort_unstable();
    let start = output_video.values().min().copied().unwrap_or(0);
    let mut skews: Vec<i64> = output_video
        .iter()
        .filter(|(_, rv)| **rv >= start + SETTLE_US)
        .filter_map(|(id, rv)| {
            let sv = *sent_video.get(id)?;
            let at = audio.partition_point(|(sa, _)| *sa < sv);
            let (sa, ra) = [at.checked_sub(1), Some(at)]
                .into_iter()
                .flatten()
                .filter_map(|i| audio.get(i))
                .min_by_key(|(sa, _)| (sa - sv).abs())
                .filter(|(sa, _)| (sa - sv).abs() <= PAIR_US)?;
            Some(((rv - ra) - (sv - sa)).abs())
        })
        .collect();
    let pairs = skews.len() as u64;
    let ms = |us: Option<i64>| us.map_or(f64::NAN, |us| us as f64 / 1000.0);
    AvSummary {
        audio_frames_sent: sent as u64,
        audio_frames_output: indices.len() as u64,
        audio_gaps: holes.len() as u64,
        audio_gap_longest_ms: holes.iter().max().map_or(0.0, |h| *h as f64 / 1000.0),
        av_skew_max_ms: ms(skews.iter().max().copied()),
        av_skew_p95_ms: ms(quantile(&mut skews, 0.95)),
        av_pairs: pairs,
    }
}

/// Frames captured: everything sent from the first frame the receiver rendered on
/// (a receiver joins at a GoP boundary; what was sent before it could not be shown).
pub fn captured(rows: &[FrameRow]) -> &[FrameRow] {
    let first = rows
        .iter()
        .position(|r| r.rendered_us.is_some())
        .unwrap_or(rows.len());
    &rows[first..]
}

/// Per frame of `rows` (every frame sent, in decode order): whether a picture decoded
/// from it came from exactly the bytes sent. That needs its own slices intact and those of
/// every reference picture before it since its GoP's keyframe (a missing or damaged
/// reference is concealed by the decoder, and every picture predicted from it is wrong).
/// Non-reference pictures break nothing after them, nor do frames a live encoder skipped
/// ([`SKIPPED`]): they are not shown, and the next picture is predicted from the one
/// before them.
pub fn intact_pictures(rows: &[FrameRow]) -> Vec<bool> {
    let mut chain_intact = false;
    rows.iter()
        .map(|r| {
            let own = r.arrived_us.is_some() && !r.damaged && r.kind != SKIPPED;
            let intact = own && (r.kind == "key" || chain_intact);
            if r.kind != "non-reference" && r.kind != SKIPPED {
                chain_intact = intact;
            }
            intact
        })
        .collect()
}

pub fn summarize(rows: &[FrameRow], facts: &RunFacts) -> Summary {
    let intact: Vec<bool> = intact_pictures(rows);
    let captured = captured(rows);
    let skipped = rows.len() - captured.len();
    let rendered_intact = captured
        .iter()
        .zip(&intact[skipped..])
        .filter(|(r, intact)| r.rendered_us.is_some() && **intact)
        .count() as u64;
    let mut latencies: Vec<i64> = captured
        .iter()
        .filter_map(|r| r.rendered_us.map(|t| t - r.available_us))
        .collect();
    let rendered = latencies.len() as u64;
    let ms = |q: f64, v: &mut Vec<i64>| quantile(v, q).map_or(f64::NAN, |us| us as f64 / 1000.0);
    let mean = latencies.iter().sum::<i64>() as f64 / latencies.len().max(1) as f64 / 1000.0;
    let on_time = latencies.iter().filter(|l| **l <= ON_TIME_US).count();
    let mut published: Vec<i64> = captured
        .iter()
        .filter_map(|r| Some(r.rendered_us? - r.published_us?))
        .collect();
    let published_mean = (!published.is_empty())
        .then(|| published.iter().sum::<i64>() as f64 / published.len() as f64 / 1000.0);

    let mut renders: Vec<i64> = captured.iter().filter_map(|r| r.rendered_us).collect();
    renders.sort_unstable();
    let (mut stalls, mut stall_total, mut gaps) = (0, 0i64, 0);
    for pair in renders.windows(2) {
        let gap = pair[1] - pair[0];
        if gap > STALL_US {
            stalls += 1;
            stall_total += gap;
        } else if gap > GAP_US {
            gaps += 1;
        }
    }

    let mut arrivals: Vec<&FrameRow> = captured.iter().filter(|r| r.arrived_us.is_some()).collect();
    arrivals.sort_by_key(|r| r.arrived_us);
    let mut jitter = InterarrivalJitter::default();
    let mut ts_df = TsDf::new(1_000_000);
    let mut windows = Vec::new();
    for r in &arrivals {
        let arrived = r.arrived_us.expect("filtered");
        jitter.push(r.available_us, arrived);
        windows.extend(ts_df.push(r.available_us, arrived));
    }

    let span_s = match (captured.first(), captured.last()) {
        (Some(a), Some(b)) => ((b.available_us - a.available_us) as f64 / 1e6).max(1.0 / 24.0),
        _ => 1.0,
    };
    let media_bytes: usize = captured.iter().map(|r| r.size).sum();
    let rendered_bytes: usize = captured
        .iter()
        .filter(|r| r.rendered_us.is_some())
        .map(|r| r.size)
        .sum();
    let stream_kbit = media_bytes as f64 * 8.0 / span_s / 1000.0;
    let usable_kbit = if facts.link_kbit > 0.0 {
        stream_kbit.min(facts.link_kbit)
    } else {
        stream_kbit
    };
    let frames = captured.len().max(1) as f64;
    let fluid_ratio = (!facts.fluid_latency_s.is_empty() && !latencies.is_empty()).then(|| {
        let model: f64 = captured
            .iter()
            .filter(|r| r.rendered_us.is_some())
            .filter_map(|r| facts.fluid_latency_s.get(r.id as usize))
            .sum::<f64>()
            / rendered as f64;
        mean / 1000.0 / model
    });
    Summary {
        system: facts.system.clone(),
        profile: facts.profile.clone(),
        repetition: facts.repetition,
        frames_captured: captured.len() as u64,
        frames_rendered: rendered,
        frames_rendered_intact: rendered_intact,
        frames_rendered_damaged: rendered - rendered_intact,
        latency_mean_ms: mean,
        latency_p50_ms: ms(0.5, &mut latencies),
        latency_p95_ms: ms(0.95, &mut latencies),
        latency_p99_ms: ms(0.99, &mut latencies),
        otdr_1s: on_time as f64 / frames,
        stalls,
        stall_total_s: stall_total as f64 / 1e6,
        frame_gaps: gaps,
        capacity_efficiency: rendered_bytes as f64 * 8.0 / span_s / 1000.0 / usable_kbit.max(1e-9),
        stream_kbit,
        rendered_kbit: rendered_bytes as f64 * 8.0 / span_s / 1000.0,
        jitter_ms: jitter.value_us() / 1000.0,
        ts_df_mean_ms: windows.iter().sum::<i64>() as f64 / windows.len().max(1) as f64 / 1000.0,
        ts_df_max_ms: windows.iter().copied().max().unwrap_or(0) as f64 / 1000.0,
        overhead: facts.wire_bytes as f64 / media_bytes.max(1) as f64,
        cpu_us_per_frame_sender: facts.sender_cpu_s * 1e6 / frames,
        cpu_us_per_frame_receiver: facts.receiver_cpu_s * 1e6 / frames,
        fluid_ratio,
        configured_latency_ms: facts.configured_latency_ms,
        decoder_latency_ms: facts.decoder_latency_ms,
        published_latency_mean_ms: published_mean,
        published_latency_p95_ms: published_mean.map(|_| ms(0.95, &mut published)),
        trace_start_us: facts.trace_start_us,
        av: None,
        abr: None,
        stages: stage_summary(captured),
    }
}

/// Fluid model (docs/metrics.md): an in-order stream whose frame `i` of `sizes[i]` bytes is
/// produced at `i / fps` s, drained by a link of rate `kbit_at(t)` (0 = unlimited). Returns
/// each frame's model latency, s: when its last byte leaves the link minus when it was
/// produced, held at its running maximum, because a player at 1× that never skips (the
/// baseline) cannot shed latency once it has built up.
pub fn fluid_model(sizes: &[usize], fps: f64, kbit_at: impl Fn(f64) -> f64) -> Vec<f64> {
    const STEP: f64 = 0.001;
    let mut latencies = Vec::with_capacity(sizes.len());
    let (mut t, mut backlog_end) = (0.0f64, 0.0f64);
    let mut drained = 0.0f64;
    let mut produced = 0.0f64;
    for (i, size) in sizes.iter().enumerate() {
        let born = i as f64 / fps;
        produced += *size as f64;
        // Advance the link until everything produced so far has left it.
        t = t.max(born).max(backlog_end);
        while drained < produced {
            let rate = kbit_at(t) * 1000.0 / 8.0;
            if rate <= 0.0 {
                drained = produced;
                break;
            }
            drained += rate * STEP;
            t += STEP;
        }
        backlog_end = t;
        let held = latencies.last().copied().unwrap_or(0.0f64);
        latencies.push((t - born).max(held));
    }
    latencies
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rendition_played_is_averaged_over_time_and_switches_counted_by_direction() {
        // 250 before the window, 600 from 10 s, 1200 from 20 s, 250 from 30 s; window 0–40 s.
        let s = 1_000_000;
        let timeline = [(-5 * s, 250), (10 * s, 600), (20 * s, 1200), (30 * s, 250)];
        let abr = abr_summary(&timeline, 0, 40 * s);
        assert_eq!((abr.switches_up, abr.switches_down), (2, 1));
        assert!(
            (abr.rendition_kbit - 575.0).abs() < 1e-9,
            "{}",
            abr.rendition_kbit
        );
        // One rendition throughout.
        let still = abr_summary(&[(0, 600)], 0, 10 * s);
        assert_eq!((still.switches_up, still.switches_down), (0, 0));
        assert!((still.rendition_kbit - 600.0).abs() < 1e-9);
    }

    fn row(id: u64, available_ms: i64, rendered_ms: Option<i64>) -> FrameRow {
        FrameRow {
            id,
            kind: "reference",
            size: 1000,
            available_us: available_ms * 1000,
            arrived_us: rendered_ms.map(|r| (r - 50) * 1000),
            rendered_us: rendered_ms.map(|r| r * 1000),
            damaged: false,
            handed_off_us: None,
            received_us: None,
            published_us: None,
        }
    }

    #[test]
    fn a_frame_is_matched_to_the_object_written_right_after_it_was_available() {
        // (written, taken): one object per frame, 41 ms apart, written 300 µs late.
        let written: Vec<(i64, i64)> = (0..5)
            .map(|i| (i * 41_000 + 300, i * 41_000 + 9_000))
            .collect();
        assert_eq!(handoff_of(82_000, &written), Some(91_000));
        assert_eq!(handoff_of(0, &written), Some(9_000));
        // Nothing written within 20 ms after (the object was dropped): no stage.
        assert_eq!(handoff_of(200_000, &written), None);
        assert_eq!(handoff_of(10_000, &written), None);
    }

    #[test]
    fn stages_split_the_delay_of_rendered_frames() {
        let mut rows: Vec<FrameRow> = (0..4)
            .map(|i| row(i, i as i64 * 42, Some(i as i64 * 42 + 300)))
            .collect();
        for r in &mut rows {
            // 10 ms queued, 100 ms in flight, 40 ms reordered (left at rendered - 50).
            r.handed_off_us = Some(r.available_us + 10_000);
            r.received_us = Some(r.available_us + 110_000);
        }
        rows[3].rendered_us = None; // not rendered: not counted
        rows[2].received_us = None; // no stage times: not counted
        let s = stage_summary(&rows).unwrap();
        assert_eq!(s.frames, 2);
        assert_eq!(
            (s.queued_p50_ms, s.flight_p50_ms, s.reorder_p95_ms),
            (10.0, 100.0, 140.0)
        );
        rows.iter_mut().for_each(|r| r.received_us = None);
        assert_eq!(stage_summary(&rows), None);
    }

    #[test]
    fn a_damaged_or_missing_reference_spoils_its_gop_until_the_next_keyframe() {
        // Two GoPs: K R N R N | K R N. Frame 1 (a reference) arrives damaged; frame 4 (a
        // non-reference) never arrives; frame 5 starts a new GoP.
        let kinds = [
            "key",
            "reference",
            "non-reference",
            "reference",
            "non-reference",
            "key",
            "reference",
            "non-reference",
        ];
        let mut rows: Vec<FrameRow> = (0..8)
            .map(|i| FrameRow {
                kind: kinds[i],
                ..row(i as u64, i as i64 * 42, Some(i as i64 * 42 + 100))
            })
            .collect();
        rows[1].damaged = true;
        rows[4].arrived_us = None;
        assert_eq!(
            intact_pictures(&rows),
            [true, false, false, false, false, true, true, true]
        );
        // Only a damaged non-reference picture: the rest of its GoP is intact.
        rows[1].damaged = false;
        rows[2].damaged = true;
        assert_eq!(
            intact_pictures(&rows),
            [true, true, false, true, false, true, true, true]
        );
        // A frame the encoder skipped is not shown and breaks nothing after it.
        rows[2].damaged = false;
        rows[1].kind = SKIPPED;
        rows[1].arrived_us = None;
        rows[1].rendered_us = None;
        assert_eq!(
            intact_pictures(&rows),
            [true, false, true, true, false, true, true, true]
        );
        rows[1] = FrameRow {
            kind: "reference",
            ..row(1, 42, Some(142))
        };
        rows[2].damaged = true;
        // Every frame rendered: the summary tells intact from damaged ones.
        let s = summarize(&rows, &RunFacts::default());
        assert_eq!(s.frames_rendered, 8);
        assert_eq!(
            (s.frames_rendered_intact, s.frames_rendered_damaged),
            (6, 2)
        );
    }

    #[test]
    fn latency_stalls_gaps_and_otdr() {
        // Frames every 42 ms; frame 5 missing (a gap), frames 10..=19 missing (a stall),
        // the last frame 1.5 s late.
        let mut rows: Vec<FrameRow> = (0..30)
            .map(|i| {
                let avail = i as i64 * 42;
                let shown = !(i == 5 || (10..20).contains(&i));
                row(i, avail, shown.then_some(avail + 200))
            })
            .collect();
        rows[29].rendered_us = Some((29 * 42 + 1500) * 1000);
        let s = summarize(&rows, &RunFacts::default());
        assert_eq!(s.frames_captured, 30);
        assert_eq!(s.frames_rendered, 19);
        assert_eq!(s.latency_p50_ms, 200.0);
        assert_eq!(s.latency_p99_ms, 1500.0);
        assert!((s.otdr_1s - 18.0 / 30.0).abs() < 1e-9);
        assert_eq!(s.frame_gaps, 1);
        assert_eq!(s.stalls, 2, "the hole and the late last frame");
        assert!((s.latency_mean_ms - (18.0 * 200.0 + 1500.0) / 19.0).abs() < 1e-9);
    }

    #[test]
    fn frames_before_the_first_render_are_not_captured() {
        let rows = vec![
            row(0, 0, None),
            row(1, 40, None),
            row(2, 80, Some(300)),
            row(3, 120, None),
        ];
        let s = summarize(&rows, &RunFacts::default());
        assert_eq!((s.frames_captured, s.frames_rendered), (2, 1));
    }

    #[test]
    fn fluid_model_grows_at_one_minus_c_over_r() {
        // 600 kbit/s stream (3125 B per frame at 24 fps) into 400 kbit/s.
        let sizes = vec![3125; 24 * 20];
        let model = fluid_model(&sizes, 24.0, |_| 400.0);
        // Per capture time the latency grows at R/C - 1 (1 - C/R per render time).
        let slope = (model[24 * 19] - model[24 * 9]) / 10.0;
        assert!((slope - (600.0 / 400.0 - 1.0)).abs() < 0.01, "{slope}");
        // Unlimited: no latency.
        assert!(fluid_model(&sizes, 24.0, |_| 0.0).iter().all(|l| *l == 0.0));
        // Faster than the stream: one frame's serialisation time.
        let fast = fluid_model(&sizes, 24.0, |_| 1000.0);
        assert!(
            (fast[100] - 3125.0 * 8.0 / 1e6).abs() < 0.002,
            "{}",
            fast[100]
        );
        // A dip raises the latency, and a 1x player keeps it after the link recovers.
        let dip = fluid_model(&sizes, 24.0, |t| {
            if (5.0..10.0).contains(&t) {
                300.0
            } else {
                1000.0
            }
        });
        assert!(dip[24 * 10] > 2.0, "{}", dip[24 * 10]);
        assert!((dip[24 * 19] - dip[24 * 11]).abs() < 1e-9);
    }

    #[test]
    fn av_figures_count_audio_holes_and_skew() {
        let frame = |index: u64, pts_ms: i64| AudioFrame {
            index,
            pts_us: pts_ms * 1000,
            duration_us: 20_000,
        };
        let sent: Vec<AudioFrame> = (0..200).map(|i| frame(i, i as i64 * 20)).collect();
        // The receiver starts at frame 10, plays 500 ms later, and loses frames 100..=104:
        // a 100 ms hole; frames 150.. are 30 ms early (a skew of 30 ms).
        let output: Vec<AudioFrame> = (10..200)
            .filter(|i| !(100..105).contains(i))
            .map(|i| {
                let shift = if i >= 150 { 470 } else { 500 };
                frame(i, i as i64 * 20 + shift)
            })
            .collect();
        let sent_video: HashMap<u64, i64> =
            (0..80).map(|id| (id, id as i64 * 41_667 + 5_000)).collect();
        let output_video: HashMap<u64, i64> = sent_video
            .iter()
            .map(|(id, t)| (*id, t + 500_000))
            .collect();
        let av = av_summary(&sent, &output, &sent_video, &output_video);
        assert_eq!((av.audio_frames_sent, av.audio_frames_output), (190, 185));
        // Frame 104's start is 100 ms after frame 99's end, and at 150 audio steps back.
        assert_eq!(av.audio_gaps, 1);
        assert_eq!(av.audio_gap_longest_ms, 100.0);
        assert!(av.av_pairs > 40);
        assert_eq!(av.av_skew_max_ms, 30.0);
    }
}
