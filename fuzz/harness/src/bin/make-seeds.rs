//! Writes the seed corpus of every fuzz target from a real encoded stream.
//!
//! ```text
//! make-seeds STREAM_DIR OUT_DIR
//! ```
//!
//! `STREAM_DIR` is what `fuzz/make-seeds.sh` records with GStreamer (x264enc + h264parse):
//! `annexb/` and `avc/` hold one access unit per file in decode order, `codec_data.hex` the
//! avcC of the `avc` caps and `timings.txt` one `DTS PTS DURATION` line (GStreamer clock
//! times) per access unit. The seeds are what the elements would put on the wire for that
//! stream: control messages of a session (in draft-14's form, and in draft-20's behind the
//! `control` target's stream selector), subgroup and fetch streams, datagrams, frame
//! headers and catalogs as `moqsink` writes them, access units as `h264parse` hands them to
//! `moqsink`, and receiver scenarios of the frames arriving in order, reordered, with a lost
//! GoP, after a stall and across a flush. Each goes to `OUT_DIR/<target>/<name>`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use arbitrary::{Arbitrary, Unstructured};
use h264::{FrameKind, ParameterSets, StreamFormat};
use moq_fuzz_harness::control::{AnyRequests, selector_for};
use moq_fuzz_harness::receive::{Encoder, HeaderSpec, INITIAL, Op, Scenario, Step, Time};
use moq_media::FrameHeader;
use moq_media::audio::OpusHead;
use moq_media::catalog::{self, Catalog, TrackEntry, TrackKind, TrackRole};
use moq_media::mapping::{DeliveryMode, Mapper, priority};
use moq_wire::codec::Codec;
use moq_wire::draft14::VERSION;
use moq_wire::draft20;
use moq_wire::message::*;

/// Wall clock of the first frame, µs since the UNIX epoch (a fixed date: seeds must not
/// change from one run to the next).
const WALL_CLOCK_US: u64 = 1_795_000_000_000_000;
/// Frame interval of the recorded stream (24 fps), ns.
const FRAME_NS: u64 = 41_666_667;
const MS: u64 = 1_000_000;
/// Access-unit bytes kept behind a frame header in frame-header and stream seeds: the
/// decoders under test never look into them.
const AU_HEAD: usize = 16;

type Result<T> = std::result::Result<T, String>;

/// One access unit of the recording, with what `moqsink` derives from it.
struct Frame {
    annexb: Vec<u8>,
    avc: Vec<u8>,
    kind: FrameKind,
    header_of: Box<dyn Fn(DeliveryMode) -> (FrameHeader, TrackRole, u64)>,
}

struct Stream {
    frames: Vec<Frame>,
    codec_data: Vec<u8>,
    sets: ParameterSets,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let [_, stream_dir, out_dir] = args.as_slice() else {
        eprintln!("usage: make-seeds STREAM_DIR OUT_DIR");
        return ExitCode::FAILURE;
    };
    match run(Path::new(stream_dir), Path::new(out_dir)) {
        Ok(count) => {
            println!("wrote {count} seeds under {out_dir}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("make-seeds: {err}");
            ExitCode::FAILURE
        }
    }
}

fn run(stream_dir: &Path, out: &Path) -> Result<usize> {
    let stream = load(stream_dir)?;
    let mut seeds = Seeds {
        out: out.to_path_buf(),
        count: 0,
    };
    control_seeds(&mut seeds)?;
    data_stream_seeds(&mut seeds, &stream)?;
    frame_header_seeds(&mut seeds, &stream)?;
    catalog_seeds(&mut seeds, &stream)?;
    h264_seeds(&mut seeds, &stream)?;
    receive_path_seeds(&mut seeds, &stream)?;
    Ok(seeds.count)
}

struct Seeds {
    out: PathBuf,
    count: usize,
}

impl Seeds {
    fn write(&mut self, target: &str, name: &str, bytes: &[u8]) -> Result<()> {
        let dir = self.out.join(target);
        fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let path = dir.join(name);
        fs::write(&path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        self.count += 1;
        Ok(())
    }
}

/// Sorted file names of a directory of access units.
fn read_units(dir: &Path) -> Result<Vec<Vec<u8>>> {
    let mut paths: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| fs::read(p).map_err(|e| format!("{}: {e}", p.display())))
        .collect()
}

/// A GStreamer clock time (`H:MM:SS.NNNNNNNNN`) in ns.
fn clock_time(text: &str) -> Result<u64> {
    let bad = || format!("not a clock time: {text:?}");
    let (hms, frac) = text.split_once('.').ok_or_else(bad)?;
    let mut parts = hms.split(':').map(|p| p.parse::<u64>().map_err(|_| bad()));
    let (h, m, s) = match (parts.next(), parts.next(), parts.next()) {
        (Some(h), Some(m), Some(s)) => (h?, m?, s?),
        _ => return Err(bad()),
    };
    let ns: u64 = frac.parse().map_err(|_| bad())?;
    Ok(((h * 60 + m) * 60 + s) * 1_000_000_000 + ns)
}

fn hex_decode(text: &str) -> Result<Vec<u8>> {
    let text = text.trim();
    (0..text.len())
        .step_by(2)
        .map(|i| {
            text.get(i..i + 2)
                .and_then(|b| u8::from_str_radix(b, 16).ok())
                .ok_or_else(|| format!("codec_data is not hex: {text:?}"))
        })
        .collect()
}

fn load(dir: &Path) -> Result<Stream> {
    let annexb = read_units(&dir.join("annexb"))?;
    let avc = read_units(&dir.join("avc"))?;
    let codec_data = hex_decode(
        &fs::read_to_string(dir.join("codec_data.hex")).map_err(|e| format!("codec_data: {e}"))?,
    )?;
    let timings_text =
        fs::read_to_string(dir.join("timings.txt")).map_err(|e| format!("timings: {e}"))?;
    let mut timings = Vec::new();
    for line in timings_text.lines().filter(|l| !l.trim().is_empty()) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [dts, pts, duration] = fields.as_slice() else {
            return Err(format!("bad timing line {line:?}"));
        };
        timings.push((clock_time(dts)?, clock_time(pts)?, clock_time(duration)?));
    }
    if annexb.is_empty() || annexb.len() != avc.len() || annexb.len() != timings.len() {
        return Err(format!(
            "{} byte-stream units, {} avc units and {} timings do not match",
            annexb.len(),
            avc.len(),
            timings.len()
        ));
    }
    let (sets, _) =
        ParameterSets::from_avcc(&codec_data).map_err(|e| format!("codec_data: {e}"))?;
    // Timestamps relative to the first PTS, in µs (the catalog timescale), as moqsink sends
    // running time; the first DTS is negative with B frames.
    let origin = timings[0].1;
    let micros = move |ns: u64| (ns as i64 - origin as i64) / 1_000;

    let mut frames = Vec::new();
    let infos: Vec<_> = annexb
        .iter()
        .map(|au| h264::classify(au, StreamFormat::ByteStream).map_err(|e| e.to_string()))
        .collect::<Result<_>>()?;
    for (i, (annexb, avc)) in annexb.into_iter().zip(avc).enumerate() {
        let info = infos[i];
        let (dts, pts, duration) = timings[i];
        let kinds: Vec<FrameKind> = infos.iter().map(|info| info.kind).collect();
        let header_of = move |mode: DeliveryMode| {
            // Replays the mapper up to this frame, as moqsink placed it.
            let mut mapper = Mapper::new(mode);
            let mut placement = None;
            for kind in &kinds[..=i] {
                placement = mapper.place(*kind);
            }
            let placement = placement.expect("the recording starts with a keyframe");
            let header = FrameHeader {
                kind: info.kind,
                slice_type: info.slice_type,
                decode_index: i as u64,
                dts: micros(dts),
                pts: micros(pts),
                duration: duration / 1_000,
                availability_us: WALL_CLOCK_US + i as u64 * FRAME_NS / 1_000,
                base_group: placement.base_group,
                base_index: placement.base_index,
            };
            (header, placement.role, placement.group)
        };
        frames.push(Frame {
            annexb,
            avc,
            kind: info.kind,
            header_of: Box::new(header_of),
        });
    }
    if frames[0].kind != FrameKind::Key {
        return Err("the recording does not start with a keyframe".into());
    }
    Ok(Stream {
        frames,
        codec_data,
        sets,
    })
}

fn encode_control(message: &ControlMessage) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    message
        .encode(&mut out)
        .map_err(|e| format!("{}: {e}", message.name()))?;
    Ok(out)
}

/// One of every control message, with the values a session between moqsink, moqsrc and a
/// relay uses.
fn control_seeds(seeds: &mut Seeds) -> Result<()> {
    use ControlMessage as M;
    let namespace = TrackNamespace::from_path("anon/live");
    let implementation = b"moqsink 0.1.0".to_vec();
    let token = Parameters::new().with_bytes(param::AUTHORIZATION_TOKEN, b"secret".to_vec());
    let subscribe = |request_id, track: &str, filter| Subscribe {
        request_id,
        namespace: namespace.clone(),
        track_name: track.as_bytes().to_vec(),
        subscriber_priority: 128,
        group_order: GroupOrder::Descending,
        forward: true,
        filter,
        params: Parameters::new(),
        fill: None,
    };
    let subscribe_ok = |request_id, track_alias, largest| SubscribeOk {
        request_id,
        track_alias,
        expires_ms: 0,
        group_order: GroupOrder::Descending,
        largest,
        params: Parameters::new(),
    };
    let messages = [
        (
            "client-setup",
            M::ClientSetup(ClientSetup {
                versions: vec![VERSION],
                params: Parameters::new()
                    .with_int(setup_param::MAX_REQUEST_ID, 100)
                    .with_bytes(setup_param::MOQT_IMPLEMENTATION, implementation.clone())
                    .with_bytes(setup_param::PATH, b"/anon".to_vec()),
            }),
        ),
        (
            "server-setup",
            M::ServerSetup(ServerSetup {
                version: VERSION,
                params: Parameters::new()
                    .with_int(setup_param::MAX_REQUEST_ID, 100)
                    .with_bytes(setup_param::MOQT_IMPLEMENTATION, implementation),
            }),
        ),
        (
            "goaway",
            M::Goaway(Goaway {
                new_session_uri: "moqt://relay.example:4443/anon".into(),
            }),
        ),
        (
            "max-request-id",
            M::MaxRequestId(MaxRequestId { request_id: 200 }),
        ),
        (
            "requests-blocked",
            M::RequestsBlocked(RequestsBlocked {
                max_request_id: 200,
            }),
        ),
        (
            "subscribe-catalog",
            M::Subscribe(subscribe(
                0,
                catalog::CATALOG_TRACK,
                FilterType::LargestObject,
            )),
        ),
        (
            "subscribe-video",
            M::Subscribe(subscribe(
                2,
                catalog::BASE_TRACK,
                FilterType::NextGroupStart,
            )),
        ),
        (
            "subscribe-range",
            M::Subscribe(Subscribe {
                params: token.clone(),
                ..subscribe(
                    4,
                    catalog::ENHANCEMENT_TRACK,
                    FilterType::AbsoluteRange {
                        start: Location::new(1_795_000_000, 0),
                        end_group: 1_795_000_100,
                    },
                )
            }),
        ),
        (
            "subscribe-start",
            M::Subscribe(subscribe(
                6,
                catalog::BASE_TRACK,
                FilterType::AbsoluteStart(Location::new(1_795_000_004, 3)),
            )),
        ),
        (
            "subscribe-ok-empty",
            M::SubscribeOk(subscribe_ok(0, 1, None)),
        ),
        (
            "subscribe-ok",
            M::SubscribeOk(subscribe_ok(2, 2, Some(Location::new(1_795_000_003, 14)))),
        ),
        (
            "subscribe-error",
            M::SubscribeError(SubscribeError {
                request_id: 4,
                code: subscribe_error::TRACK_DOES_NOT_EXIST,
                reason: "no such track".into(),
            }),
        ),
        (
            "subscribe-update",
            M::SubscribeUpdate(SubscribeUpdate {
                request_id: 8,
                subscription_request_id: 2,
                start: Location::new(1_795_000_004, 0),
                end_group: Some(1_795_000_010),
                subscriber_priority: 64,
                forward: true,
                params: Parameters::new().with_int(param::DELIVERY_TIMEOUT, 500),
            }),
        ),
        ("unsubscribe", M::Unsubscribe(Unsubscribe { request_id: 2 })),
        (
            "publish-done",
            M::PublishDone(PublishDone {
                request_id: 2,
                status: publish_done_code::TRACK_ENDED,
                stream_count: 5,
                reason: "end of stream".into(),
            }),
        ),
        (
            "publish",
            M::Publish(Publish {
                request_id: 1,
                namespace: namespace.clone(),
                track_name: catalog::BASE_TRACK.as_bytes().to_vec(),
                track_alias: 7,
                group_order: GroupOrder::Ascending,
                largest: Some(Location::new(1_795_000_003, 14)),
                forward: true,
                params: Parameters::new(),
            }),
        ),
        (
            "publish-ok",
            M::PublishOk(PublishOk {
                request_id: 1,
                forward: true,
                subscriber_priority: 128,
                group_order: GroupOrder::Descending,
                filter: FilterType::LargestObject,
                params: Parameters::new(),
            }),
        ),
        (
            "publish-error",
            M::PublishError(PublishError {
                request_id: 1,
                code: publish_error::NOT_SUPPORTED,
                reason: "publish not supported".into(),
            }),
        ),
        (
            "fetch-standalone",
            M::Fetch(Fetch {
                request_id: 10,
                subscriber_priority: 128,
                group_order: GroupOrder::Publisher,
                fetch_type: FetchType::Standalone {
                    namespace: namespace.clone(),
                    track_name: catalog::BASE_TRACK.as_bytes().to_vec(),
                    start: Location::new(1_795_000_001, 0),
                    end: Location::new(1_795_000_002, 0),
                },
                params: token.clone(),
            }),
        ),
        (
            "fetch-relative",
            M::Fetch(Fetch {
                request_id: 12,
                subscriber_priority: 128,
                group_order: GroupOrder::Ascending,
                fetch_type: FetchType::RelativeJoining(JoiningFetch {
                    joining_request_id: 2,
                    joining_start: 1,
                }),
                params: Parameters::new(),
            }),
        ),
        (
            "fetch-absolute",
            M::Fetch(Fetch {
                request_id: 14,
                subscriber_priority: 0,
                group_order: GroupOrder::Descending,
                fetch_type: FetchType::AbsoluteJoining(JoiningFetch {
                    joining_request_id: 2,
                    joining_start: 1_795_000_000,
                }),
                params: Parameters::new(),
            }),
        ),
        (
            "fetch-ok",
            M::FetchOk(FetchOk {
                request_id: 10,
                group_order: GroupOrder::Ascending,
                end_of_track: false,
                end_location: Location::new(1_795_000_002, 0),
                params: Parameters::new().with_int(param::MAX_CACHE_DURATION, 10_000),
            }),
        ),
        (
            "fetch-error",
            M::FetchError(FetchError {
                request_id: 10,
                code: fetch_error::NOT_SUPPORTED,
                reason: "fetch not supported".into(),
            }),
        ),
        (
            "fetch-cancel",
            M::FetchCancel(FetchCancel { request_id: 10 }),
        ),
        (
            "track-status",
            M::TrackStatus(subscribe(
                16,
                catalog::BASE_TRACK,
                FilterType::LargestObject,
            )),
        ),
        (
            "track-status-ok",
            M::TrackStatusOk(subscribe_ok(16, 0, Some(Location::new(1_795_000_003, 2)))),
        ),
        (
            "track-status-error",
            M::TrackStatusError(SubscribeError {
                request_id: 16,
                code: subscribe_error::UNAUTHORIZED,
                reason: String::new(),
            }),
        ),
        (
            "publish-namespace",
            M::PublishNamespace(PublishNamespace {
                request_id: 1,
                namespace: namespace.clone(),
                params: token,
            }),
        ),
        (
            "publish-namespace-ok",
            M::PublishNamespaceOk(PublishNamespaceOk { request_id: 1 }),
        ),
        (
            "publish-namespace-error",
            M::PublishNamespaceError(PublishNamespaceError {
                request_id: 1,
                code: publish_namespace_error::UNAUTHORIZED,
                reason: "not allowed".into(),
            }),
        ),
        (
            "publish-namespace-done",
            M::PublishNamespaceDone(PublishNamespaceDone {
                namespace: namespace.clone(),
            }),
        ),
        (
            "publish-namespace-cancel",
            M::PublishNamespaceCancel(PublishNamespaceCancel {
                namespace: namespace.clone(),
                code: publish_namespace_error::TIMEOUT,
                reason: "going away".into(),
            }),
        ),
        (
            "subscribe-namespace",
            M::SubscribeNamespace(SubscribeNamespace {
                request_id: 3,
                namespace_prefix: NamespacePrefix(TrackNamespace::from_path("anon")),
                params: Parameters::new(),
            }),
        ),
        (
            "subscribe-namespace-all",
            M::SubscribeNamespace(SubscribeNamespace {
                request_id: 5,
                namespace_prefix: NamespacePrefix(TrackNamespace(Vec::new())),
                params: Parameters::new(),
            }),
        ),
        (
            "subscribe-namespace-ok",
            M::SubscribeNamespaceOk(SubscribeNamespaceOk { request_id: 3 }),
        ),
        (
            "subscribe-namespace-error",
            M::SubscribeNamespaceError(SubscribeNamespaceError {
                request_id: 5,
                code: subscribe_namespace_error::NOT_SUPPORTED,
                reason: "not supported".into(),
            }),
        ),
        (
            "unsubscribe-namespace",
            M::UnsubscribeNamespace(UnsubscribeNamespace {
                namespace_prefix: NamespacePrefix(namespace.clone()),
            }),
        ),
    ];
    for (name, message) in &messages {
        seeds.write("control", name, &encode_control(message)?)?;
    }

    // What only drafts from 17 on say: a live join filled from the current group, a
    // redirect, SUBSCRIBE_TRACKS.
    let draft20_only = [
        (
            "subscribe-fill",
            M::Subscribe(Subscribe {
                fill: Some(Fill {
                    filter: Some(FilterType::GroupsBack(0)),
                    ..Fill::default()
                }),
                ..subscribe(2, catalog::BASE_TRACK, FilterType::LargestObject)
            }),
        ),
        (
            "redirect",
            M::Redirect(Redirect {
                request_id: 2,
                reason: "moved".into(),
                connect_uri: "moqt://relay.example:4443/anon".into(),
                target: Some((namespace.clone(), catalog::BASE_TRACK.as_bytes().to_vec())),
            }),
        ),
        (
            "subscribe-tracks",
            M::SubscribeTracks(SubscribeNamespace {
                request_id: 3,
                namespace_prefix: NamespacePrefix(TrackNamespace::from_path("anon")),
                params: Parameters::new(),
            }),
        ),
    ];
    // Draft-20's form of each (draft-22's differs in filters only), behind the selector of
    // the stream it travels on.
    for (name, message) in messages.iter().chain(&draft20_only) {
        let mut bytes = Vec::new();
        if draft20::CODEC
            .encode_control(message, &AnyRequests, &mut bytes)
            .is_err()
        {
            continue; // No draft-20 form (UNSUBSCRIBE, MAX_REQUEST_ID, ...).
        }
        let selector = selector_for(&draft20::CODEC, message, &bytes)
            .ok_or_else(|| format!("draft-20 {name} decodes on no stream"))?;
        let mut seed = vec![selector];
        seed.extend_from_slice(&bytes);
        seeds.write("control", &format!("draft20-{name}"), &seed)?;
    }
    Ok(())
}

/// Frame header plus the start of the access unit: an object payload as moqsink writes it,
/// cut short.
fn payload_head(header: &FrameHeader, au: &[u8]) -> Vec<u8> {
    let mut payload = Vec::new();
    header.encode(&mut payload);
    payload.extend_from_slice(&au[..au.len().min(AU_HEAD)]);
    payload
}

/// An extension block with the one property relays read (an even key, integer value: a
/// timestamp) and an odd-keyed byte value.
fn extensions(frame_header: &FrameHeader) -> Result<Vec<u8>> {
    encode_extensions(&[
        KeyValuePair::int(0x06, frame_header.availability_us),
        KeyValuePair::bytes(0x0b, b"moq".to_vec()),
    ])
    .map_err(|e| e.to_string())
}

fn data_stream_seeds(seeds: &mut Seeds, stream: &Stream) -> Result<()> {
    const ALIAS: u64 = 2;
    let mode = DeliveryMode::Combined;
    let frames: Vec<(FrameHeader, TrackRole, u64, &[u8])> = stream
        .frames
        .iter()
        .map(|f| {
            let (h, role, group) = (f.header_of)(mode);
            (h, role, group, f.annexb.as_slice())
        })
        .collect();

    // Subgroup streams of the base track as moqsink opens them: one per GoP, subgroup 0,
    // end of group, contiguous object IDs; and the enhancement track's one-frame streams.
    let mut groups: Vec<u64> = frames
        .iter()
        .filter(|f| f.1 == TrackRole::Base)
        .map(|f| f.2)
        .collect();
    groups.dedup();
    for group in groups {
        let mut bytes = Vec::new();
        DataStreamHeader::Subgroup(SubgroupHeader {
            track_alias: ALIAS,
            group_id: group,
            subgroup_id: SubgroupId::Zero,
            publisher_priority: priority::base(mode, group).publisher,
            extensions_present: false,
            contains_end_of_group: true,
        })
        .encode(&mut bytes);
        for (header, _, _, au) in frames
            .iter()
            .filter(|f| f.1 == TrackRole::Base && f.2 == group)
        {
            let payload = payload_head(header, au);
            SubgroupObjectHeader {
                object_id_delta: 0,
                extensions: Vec::new(),
                payload_len: payload.len() as u64,
                status: ObjectStatus::Normal,
            }
            .encode(false, &mut bytes);
            bytes.extend_from_slice(&payload);
        }
        seeds.write("data_stream", &format!("subgroup-gop-{group}"), &bytes)?;
    }
    if let Some((header, _, group, au)) = frames.iter().find(|f| f.1 == TrackRole::Enhancement) {
        let mut bytes = Vec::new();
        DataStreamHeader::Subgroup(SubgroupHeader {
            track_alias: ALIAS + 1,
            group_id: *group,
            subgroup_id: SubgroupId::Zero,
            publisher_priority: priority::enhancement(*group).publisher,
            extensions_present: false,
            contains_end_of_group: true,
        })
        .encode(&mut bytes);
        let payload = payload_head(header, au);
        SubgroupObjectHeader {
            payload_len: payload.len() as u64,
            ..Default::default()
        }
        .encode(false, &mut bytes);
        bytes.extend_from_slice(&payload);
        seeds.write("data_stream", "subgroup-enhancement", &bytes)?;
    }

    // The other subgroup layouts a relay may forward: every valid stream type, with
    // extensions, explicit subgroup IDs, gaps in object IDs and a status object at the end.
    let (first, ..) = frames[0];
    let block = extensions(&first)?;
    for (name, subgroup_id, extensions_present, contains_end_of_group) in [
        (
            "subgroup-first-object-id",
            SubgroupId::FirstObjectId,
            false,
            false,
        ),
        ("subgroup-explicit-ext", SubgroupId::Explicit(3), true, true),
        ("subgroup-zero-ext", SubgroupId::Zero, true, false),
    ] {
        let mut bytes = Vec::new();
        DataStreamHeader::Subgroup(SubgroupHeader {
            track_alias: ALIAS,
            group_id: first.base_group,
            subgroup_id,
            publisher_priority: 64,
            extensions_present,
            contains_end_of_group,
        })
        .encode(&mut bytes);
        let mut previous = None;
        for (object_id, (header, _, _, au)) in [5u64, 6, 9].into_iter().zip(&frames) {
            let payload = payload_head(header, au);
            SubgroupObjectHeader {
                object_id_delta: SubgroupObjectHeader::object_id_delta(previous, object_id)
                    .ok_or("object IDs must increase")?,
                extensions: if extensions_present {
                    extensions(header)?
                } else {
                    Vec::new()
                },
                payload_len: payload.len() as u64,
                status: ObjectStatus::Normal,
            }
            .encode(extensions_present, &mut bytes);
            bytes.extend_from_slice(&payload);
            previous = Some(object_id);
        }
        SubgroupObjectHeader {
            object_id_delta: 0,
            extensions: Vec::new(),
            payload_len: 0,
            status: ObjectStatus::EndOfGroup,
        }
        .encode(extensions_present, &mut bytes);
        seeds.write("data_stream", name, &bytes)?;
    }

    // A fetch stream: full locations per object, extensions always present.
    let mut bytes = Vec::new();
    DataStreamHeader::Fetch(FetchHeader { request_id: 10 }).encode(&mut bytes);
    for (object_id, (header, _, group, au)) in frames.iter().take(4).enumerate() {
        let payload = payload_head(header, au);
        FetchObjectHeader {
            group_id: *group,
            subgroup_id: 0,
            object_id: object_id as u64,
            publisher_priority: 64,
            extensions: if object_id == 1 {
                block.clone()
            } else {
                Vec::new()
            },
            payload_len: payload.len() as u64,
            status: ObjectStatus::Normal,
        }
        .encode(&mut bytes);
        bytes.extend_from_slice(&payload);
    }
    FetchObjectHeader {
        group_id: first.base_group,
        subgroup_id: 0,
        object_id: 4,
        publisher_priority: 64,
        extensions: Vec::new(),
        payload_len: 0,
        status: ObjectStatus::EndOfTrack,
    }
    .encode(&mut bytes);
    seeds.write("data_stream", "fetch", &bytes)?;

    // Datagrams: with and without object ID, extensions, end of group, and status.
    let payload = payload_head(&first, frames[0].3);
    let datagrams = [
        ("datagram", 7, Vec::new(), false, None),
        ("datagram-object-0", 0, Vec::new(), false, None),
        ("datagram-ext-end", 3, block.clone(), true, None),
        (
            "datagram-status",
            8,
            Vec::new(),
            false,
            Some(ObjectStatus::EndOfGroup),
        ),
        (
            "datagram-status-ext",
            8,
            block.clone(),
            false,
            Some(ObjectStatus::EndOfTrack),
        ),
    ];
    for (name, object_id, extensions, end_of_group, status) in datagrams {
        let mut bytes = Vec::new();
        DatagramHeader {
            track_alias: ALIAS,
            group_id: first.base_group,
            object_id,
            publisher_priority: 64,
            extensions,
            end_of_group,
            status,
        }
        .encode(&mut bytes);
        if status.is_none() {
            bytes.extend_from_slice(&payload);
        }
        seeds.write("data_stream", name, &bytes)?;
    }

    // A bare extension block.
    seeds.write("data_stream", "extensions", &block)?;
    Ok(())
}

fn kind_name(kind: FrameKind) -> &'static str {
    match kind {
        FrameKind::Key => "key",
        FrameKind::Reference => "ref",
        FrameKind::NonReference => "nonref",
    }
}

fn frame_header_seeds(seeds: &mut Seeds, stream: &Stream) -> Result<()> {
    for (i, frame) in stream.frames.iter().enumerate() {
        let (header, ..) = (frame.header_of)(DeliveryMode::SkipGops);
        let name = format!("frame-{i:03}-{}", kind_name(frame.kind));
        seeds.write("frame_header", &name, &payload_head(&header, &frame.annexb))?;
    }
    Ok(())
}

fn catalog_seeds(seeds: &mut Seeds, stream: &Stream) -> Result<()> {
    let sps = stream
        .sets
        .sps_info()
        .ok_or("codec_data has no usable SPS")?;
    for mode in DeliveryMode::ALL {
        let mut tracks = vec![TrackEntry {
            codec: Some(sps.codec_string()),
            width: Some(sps.width),
            height: Some(sps.height),
            framerate: Some([24, 1]),
            avcc: Some(catalog::hex_encode(&stream.sets.avcc())),
            enhancement: mode
                .splits_layers()
                .then(|| catalog::ENHANCEMENT_TRACK.into()),
            ..TrackEntry::new(catalog::BASE_TRACK, TrackKind::Video)
        }];
        if mode.splits_layers() {
            tracks.push(TrackEntry {
                base: Some(catalog::BASE_TRACK.into()),
                ..TrackEntry::new(catalog::ENHANCEMENT_TRACK, TrackKind::VideoEnhancement)
            });
        }
        // Audio of both codecs: Opus with its OpusHead, AAC-LC with its AudioSpecificConfig.
        let (codec, config) = if mode.newest_group_first() {
            ("opus", OpusHead::simple(2, 48_000).to_bytes())
        } else {
            ("mp4a.40.2", vec![0x11, 0x90])
        };
        tracks.push(TrackEntry {
            codec: Some(codec.into()),
            sample_rate: Some(48_000),
            channels: Some(2),
            config: Some(catalog::hex_encode(&config)),
            ..TrackEntry::new(catalog::AUDIO_TRACK, TrackKind::Audio)
        });
        let doc = Catalog::native(mode.name(), WALL_CLOCK_US / 1_000, tracks);
        Catalog::from_json(&doc.to_json()).map_err(|e| format!("catalog: {e}"))?;
        seeds.write(
            "catalog",
            &format!("catalog-{}", mode.name()),
            &doc.to_json(),
        )?;
    }
    Ok(())
}

/// `h264` seeds start with a selector byte whose low bits give the avc length size:
/// 0 → 1 byte, 1 → 2 bytes, 2 → 4 bytes.
fn h264_seeds(seeds: &mut Seeds, stream: &Stream) -> Result<()> {
    let with_selector = |selector: u8, bytes: &[u8]| {
        let mut input = vec![selector];
        input.extend_from_slice(bytes);
        input
    };
    for (i, frame) in stream.frames.iter().enumerate() {
        let kind = kind_name(frame.kind);
        seeds.write(
            "h264",
            &format!("annexb-{i:03}-{kind}"),
            &with_selector(2, &frame.annexb),
        )?;
        seeds.write(
            "h264",
            &format!("avc4-{i:03}-{kind}"),
            &with_selector(2, &frame.avc),
        )?;
        // Shorter length prefixes, where the NAL units fit them.
        if let Ok(avc2) = h264::annexb_to_avc(&frame.annexb, 2)
            && i < 16
        {
            seeds.write(
                "h264",
                &format!("avc2-{i:03}-{kind}"),
                &with_selector(1, &avc2),
            )?;
        }
        if let Ok(avc1) = h264::annexb_to_avc(&frame.annexb, 1) {
            seeds.write(
                "h264",
                &format!("avc1-{i:03}-{kind}"),
                &with_selector(0, &avc1),
            )?;
        }
    }
    seeds.write(
        "h264",
        "avcc-codec-data",
        &with_selector(2, &stream.codec_data),
    )?;
    for nal in h264::nal_units(&stream.sets.annexb_prefix(), StreamFormat::ByteStream) {
        let nal = nal.map_err(|e| e.to_string())?;
        let name = format!("nal-type-{}", nal.nal_type);
        seeds.write("h264", &name, &with_selector(2, nal.data))?;
    }
    Ok(())
}

/// One frame of a scenario: its header, its layer and the ns it arrives at.
struct Arrival {
    header: FrameHeader,
    enhancement: bool,
    at: u64,
}

/// Turns arrivals (in arrival order) into push ops, each followed by `after` ops.
fn ops_for(arrivals: &[Arrival], mut after: impl FnMut(usize, &Arrival) -> Vec<Op>) -> Vec<Op> {
    let mut ops = Vec::new();
    let mut previous = INITIAL;
    let mut now = 0;
    for (i, arrival) in arrivals.iter().enumerate() {
        let at = arrival
            .at
            .checked_sub(now)
            .and_then(|d| u32::try_from(d).ok());
        ops.push(Op::Push {
            at: at.map_or(Time::At(arrival.at), Time::After),
            header: HeaderSpec::between(&previous, &arrival.header),
            enhancement: arrival.enhancement,
        });
        previous = arrival.header;
        now = arrival.at;
        ops.extend(after(i, arrival));
    }
    ops
}

fn arrivals(stream: &Stream, mode: DeliveryMode) -> Vec<Arrival> {
    stream
        .frames
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let (header, role, _) = (f.header_of)(mode);
            Arrival {
                header,
                enhancement: role == TrackRole::Enhancement,
                // Frames reach the receiver 30 ms after they were produced.
                at: 30 * MS + i as u64 * FRAME_NS,
            }
        })
        .collect()
}

fn check_scenario(scenario: &Scenario) -> Result<Vec<u8>> {
    let bytes = Encoder::scenario(scenario);
    let back = Scenario::arbitrary_take_rest(Unstructured::new(&bytes))
        .map_err(|e| format!("scenario does not decode: {e}"))?;
    if &back != scenario {
        return Err("scenario decodes to something else: the arbitrary layout changed".into());
    }
    Ok(bytes)
}

fn receive_path_seeds(seeds: &mut Seeds, stream: &Stream) -> Result<()> {
    let drain =
        |_: usize, a: &Arrival| vec![Op::Drain(Time::After(0)), Op::Deadline(Time::At(a.at))];
    let mut scenarios = Vec::new();

    // Baseline: everything on one track, in order, played as it comes.
    scenarios.push((
        "baseline-in-order",
        Scenario {
            latency_ns: 100 * MS,
            skip_forward: false,
            adaptive: false,
            wire: true,
            ops: ops_for(&arrivals(stream, DeliveryMode::Baseline), drain),
        },
    ));

    // Combined: non-reference frames on their own streams arrive two frames late, and the
    // receiver pops on a 10 ms tick.
    let mut combined = arrivals(stream, DeliveryMode::Combined);
    for a in combined.iter_mut().filter(|a| a.enhancement) {
        a.at += 2 * FRAME_NS;
    }
    combined.sort_by_key(|a| a.at);
    scenarios.push((
        "combined-reordered",
        Scenario {
            latency_ns: 100 * MS,
            skip_forward: true,
            adaptive: true,
            wire: true,
            ops: ops_for(&combined, |_, _| {
                vec![
                    Op::Pop(Time::After(0)),
                    Op::Deadline(Time::After(0)),
                    Op::Drain(Time::After(10_000_000)),
                ]
            }),
        },
    ));

    // Skip-GoPs: the tail of the second GoP never comes, its stream is reset, and the
    // receiver jumps to the next keyframe.
    let skip = arrivals(stream, DeliveryMode::SkipGops);
    let second_group = skip
        .iter()
        .filter(|a| a.header.kind == FrameKind::Key)
        .nth(1)
        .map(|a| a.header.base_group)
        .ok_or("the recording has a single GoP")?;
    let mut in_second = 0;
    let lossy: Vec<Arrival> = skip
        .into_iter()
        .filter(|a| {
            if a.header.base_group != second_group {
                return true;
            }
            in_second += 1;
            in_second <= 4
        })
        .collect();
    scenarios.push((
        "skip-gops-lost-tail",
        Scenario {
            latency_ns: 100 * MS,
            skip_forward: true,
            adaptive: true,
            wire: true,
            ops: ops_for(&lossy, |_, a| {
                let mut ops = vec![Op::Drain(Time::After(0))];
                if a.header.base_group == second_group + 1 && a.header.kind == FrameKind::Key {
                    ops.insert(0, Op::GroupLost(Step::Delta(-1)));
                }
                ops
            }),
        },
    ));

    // A stall: nothing for 600 ms, then a burst; the playout clock re-anchors.
    let mut stalled = arrivals(stream, DeliveryMode::SkipGops);
    for a in stalled.iter_mut().skip(20) {
        a.at = a.at.max(20 * FRAME_NS + 600 * MS);
    }
    scenarios.push((
        "stall-burst",
        Scenario {
            latency_ns: 200 * MS,
            skip_forward: true,
            adaptive: false,
            wire: true,
            ops: ops_for(&stalled, |_, _| {
                vec![
                    Op::Deadline(Time::After(0)),
                    Op::Drain(Time::After(1_000_000)),
                ]
            }),
        },
    ));

    // A flush in the middle (seek or reconnect), then the next GoP.
    let flush_at = stream
        .frames
        .iter()
        .enumerate()
        .filter(|(_, f)| f.kind == FrameKind::Key)
        .nth(2)
        .map_or(stream.frames.len() / 2, |(i, _)| i);
    scenarios.push((
        "flush",
        Scenario {
            latency_ns: 100 * MS,
            skip_forward: false,
            adaptive: true,
            wire: true,
            ops: ops_for(&arrivals(stream, DeliveryMode::Baseline), |i, _| {
                let mut ops = vec![Op::Drain(Time::After(0))];
                if i + 1 == flush_at {
                    ops.push(Op::Clear);
                } else if i + 1 == flush_at + 5 {
                    ops.push(Op::ResetClock);
                }
                ops
            }),
        },
    ));

    for (name, scenario) in &scenarios {
        seeds.write("receive_path", name, &check_scenario(scenario)?)?;
    }
    Ok(())
}
