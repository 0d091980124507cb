//! Classification of real x264 output, checked frame by frame against h264parse's own
//! reading of the same stream, and validation of real x264 and openh264 output by
//! [`StreamParser`].
//!
//! Each test encodes 120 frames with `x264enc` (or `openh264enc`), lets `h264parse` deliver
//! access units to `multifilesink` (one file per buffer, so one file per AU exactly as the
//! sink element would receive it) and logs what h264parse parsed. The tests fail, rather than
//! skip, when the GStreamer tools or elements are missing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use h264::{
    FrameKind, ParameterSets, SliceType, StreamFormat, StreamParser, annexb_to_avc, avc_to_annexb,
    classify, nal_type, nal_units,
};

const FRAMES: usize = 120;

/// Per-picture view, compared between this crate and h264parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Picture {
    kind: FrameKind,
    slice: SliceType,
}

struct Encoded {
    format: StreamFormat,
    /// One entry per buffer h264parse pushed.
    access_units: Vec<Vec<u8>>,
    /// What h264parse's debug log says about each picture, in the same order.
    parser_view: Vec<Picture>,
    /// `codec_data` of h264parse's source caps (avc only).
    codec_data: Option<Vec<u8>>,
}

/// Removes the scratch directory however the test ends.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let path =
            std::env::temp_dir().join(format!("h264-x264-{name}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const INSTALL_HINT: &str = "install them with: apt-get install -y gstreamer1.0-tools \
    gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-bad \
    gstreamer1.0-plugins-ugly";

/// Fails unless the GStreamer tools and the elements the pipelines use, `element` among
/// them, are installed.
fn require_gstreamer(element: &str) {
    for tool in ["gst-launch-1.0", "gst-inspect-1.0"] {
        let found = Command::new(tool).arg("--version").output();
        assert!(
            found.is_ok_and(|out| out.status.success()),
            "{tool} is not available; {INSTALL_HINT}"
        );
    }
    for element in ["videotestsrc", element, "h264parse", "multifilesink"] {
        let status = Command::new("gst-inspect-1.0")
            .args(["--exists", element])
            .status()
            .unwrap();
        assert!(
            status.success(),
            "GStreamer element {element} is missing; {INSTALL_HINT}"
        );
    }
}

fn encode(name: &str, b_pyramid: bool, stream_format: &str) -> Encoded {
    encode_with(
        name,
        "format=I420,width=320,height=240",
        &format!("x264enc bframes=3 key-int-max=15 b-pyramid={b_pyramid}"),
        stream_format,
    )
}

/// Encodes `FRAMES` frames of `raw` video (caps fields) with `encoder` (an element and its
/// properties, optionally with more elements or caps around it).
fn encode_with(name: &str, raw: &str, encoder: &str, stream_format: &str) -> Encoded {
    // Elements only; caps (with a '/') need no plugin check.
    for element in encoder.split(" ! ").filter(|e| !e.contains('/')) {
        require_gstreamer(element.split(' ').next().unwrap());
    }
    let dir = TempDir::new(name);
    let pipeline = [
        format!("videotestsrc num-buffers={FRAMES} pattern=ball"),
        format!("video/x-raw,{raw},framerate=24/1"),
        encoder.into(),
        "h264parse".into(),
        format!("video/x-h264,stream-format={stream_format},alignment=au"),
        format!(
            "multifilesink location={}",
            dir.0.join("au-%05d.h264").display()
        ),
    ];
    let mut args = vec!["-v".to_owned()];
    for (i, element) in pipeline.iter().enumerate() {
        if i > 0 {
            args.push("!".into());
        }
        args.extend(element.split(' ').map(str::to_owned));
    }
    let args: Vec<String> = args.into_iter().filter(|a| !a.is_empty()).collect();
    let out = Command::new("gst-launch-1.0")
        .args(&args)
        // h264parse logs NAL types, picture starts and slice types; the codec parser library
        // it uses logs each NAL header with its nal_ref_idc.
        .env("GST_DEBUG", "h264parse:6,codecparsers_h264:5")
        .env("GST_DEBUG_NO_COLOR", "1")
        .output()
        .expect("gst-launch-1.0 could not be started");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "gst-launch-1.0 {} failed: {}\n{}",
        args.join(" "),
        stdout,
        tail(&stderr)
    );
    let codec_data = codec_data(&stdout);
    let format = match (stream_format, &codec_data) {
        ("avc", Some(record)) => StreamFormat::Avc {
            length_size: ParameterSets::from_avcc(record).unwrap().1,
        },
        ("avc", None) => panic!("avc caps without codec_data: {stdout}"),
        _ => StreamFormat::ByteStream,
    };
    Encoded {
        format,
        access_units: read_access_units(&dir.0),
        parser_view: parser_view(&stderr),
        codec_data,
    }
}

fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

fn read_access_units(dir: &Path) -> Vec<Vec<u8>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    files.iter().map(|f| std::fs::read(f).unwrap()).collect()
}

/// `codec_data=(buffer)HEX` from the caps `gst-launch-1.0 -v` prints for h264parse's src pad.
fn codec_data(stdout: &str) -> Option<Vec<u8>> {
    let line = stdout
        .lines()
        .find(|l| l.contains("h264parse0.GstPad:src: caps"))?;
    let hex = line.split("codec_data=(buffer)").nth(1)?;
    let hex: String = hex.chars().take_while(char::is_ascii_hexdigit).collect();
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok())
        .collect()
}

/// Rebuilds h264parse's per-picture view from its debug log.
///
/// Lines used, in the order one streaming thread writes them:
/// - `gst_h264_parse_nalu_header: Nal type T, ref_idc R` (codecparsers_h264, once or twice per
///   NAL unit as h264parse scans for its end),
/// - `processing nal of type T …` (h264parse, the NAL unit it now acts on; for slices the
///   header line just before belongs to it),
/// - `frame start: 1` (h264parse decided this slice begins a new picture),
/// - `parse result 0, first MB: M, slice type: S` (h264parse's parse of that slice header).
fn parser_view(log: &str) -> Vec<Picture> {
    let mut last_header: Option<(u8, u8)> = None;
    let mut processing: Option<(u8, u8)> = None;
    let mut pictures: Vec<(u8, u8, Option<u32>)> = Vec::new();
    for line in log.lines() {
        if let Some(rest) = after(line, "gst_h264_parse_nalu_header: Nal type ") {
            let (nal_type, ref_idc) = rest.split_once(", ref_idc ").expect(line);
            last_header = Some((number(nal_type), number(ref_idc)));
        } else if let Some(rest) = after(line, "processing nal of type ") {
            let nal_type: u8 = number(rest.split(' ').next().unwrap());
            // Parameter sets from codec_data are all read before they are processed, so only
            // slices are matched to the header line right before them.
            if matches!(nal_type, 1 | 2 | 5) {
                let header = last_header
                    .take()
                    .expect("NAL header logged before the slice");
                assert_eq!(header.0, nal_type, "log order not as expected at: {line}");
                processing = Some(header);
            }
        } else if line.trim_end().ends_with("frame start: 1") {
            let (nal_type, ref_idc) = processing.expect("picture start outside a slice");
            pictures.push((nal_type, ref_idc, None));
        } else if let Some(rest) = after(line, "parse result 0, first MB: ") {
            let slice_type = number(rest.split("slice type: ").nth(1).expect(line));
            if let Some(picture) = pictures.last_mut() {
                picture.2.get_or_insert(slice_type);
            }
        }
    }
    pictures
        .into_iter()
        .map(|(nal_type, ref_idc, slice_type)| Picture {
            kind: match (nal_type, ref_idc) {
                (5, _) => FrameKind::Key,
                (_, 0) => FrameKind::NonReference,
                _ => FrameKind::Reference,
            },
            slice: match slice_type.expect("h264parse logged the picture's slice type") % 5 {
                0 => SliceType::P,
                1 => SliceType::B,
                2 => SliceType::I,
                3 => SliceType::Sp,
                _ => SliceType::Si,
            },
        })
        .collect()
}

fn after<'a>(line: &'a str, marker: &str) -> Option<&'a str> {
    line.split_once(marker).map(|(_, rest)| rest.trim_end())
}

fn number<T: std::str::FromStr>(text: &str) -> T {
    text.trim()
        .parse()
        .unwrap_or_else(|_| panic!("not a number in log: {text:?}"))
}

fn tally(pictures: &[Picture]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for p in pictures {
        *counts.entry(format!("{:?}", p.kind)).or_default() += 1;
        *counts.entry(format!("{:?}", p.slice)).or_default() += 1;
        *counts
            .entry(format!("{:?}-{:?}", p.slice, p.kind))
            .or_default() += 1;
    }
    counts
}

/// Classifies every AU, checks it against h264parse and returns our view.
fn check_against_h264parse(label: &str, encoded: &Encoded) -> Vec<Picture> {
    assert_eq!(
        encoded.access_units.len(),
        FRAMES,
        "{label}: one AU per frame"
    );
    assert_eq!(
        encoded.parser_view.len(),
        FRAMES,
        "{label}: h264parse log shows one picture per frame"
    );
    let ours: Vec<Picture> = encoded
        .access_units
        .iter()
        .enumerate()
        .map(|(i, au)| {
            let info = classify(au, encoded.format)
                .unwrap_or_else(|e| panic!("{label}: AU {i} does not classify: {e}"));
            Picture {
                kind: info.kind,
                slice: info.slice_type,
            }
        })
        .collect();
    println!("{label}: ours      {:?}", tally(&ours));
    println!("{label}: h264parse {:?}", tally(&encoded.parser_view));
    assert_eq!(tally(&ours), tally(&encoded.parser_view), "{label}: counts");
    for (i, (a, b)) in ours.iter().zip(&encoded.parser_view).enumerate() {
        assert_eq!(a, b, "{label}: AU {i} ours vs h264parse");
    }

    let first = classify(&encoded.access_units[0], encoded.format).unwrap();
    assert_eq!(
        first.kind,
        FrameKind::Key,
        "{label}: stream starts with IDR"
    );
    assert!(
        first.has_sps && first.has_pps,
        "{label}: first AU carries SPS+PPS"
    );
    ours
}

/// SPS/PPS from the first AU parse to what the caps promised.
fn in_band_parameter_sets(label: &str, encoded: &Encoded) -> ParameterSets {
    let mut sets = ParameterSets::default();
    assert!(
        sets.update_from_au(&encoded.access_units[0], encoded.format)
            .unwrap()
    );
    assert!(sets.is_complete());
    let sps = sets.sps_info().unwrap();
    assert_eq!((sps.width, sps.height), (320, 240), "{label}: SPS size");
    assert_eq!(
        sps.profile_idc, 100,
        "{label}: I420 input gives High profile"
    );
    assert_eq!(sps.chroma_format_idc, 1);
    assert_eq!(
        sps.codec_string(),
        format!("avc1.6400{:02x}", sps.level_idc)
    );
    println!("{label}: codec {}", sps.codec_string());
    for au in &encoded.access_units[1..] {
        sets.update_from_au(au, encoded.format).unwrap();
    }
    sets
}

fn count(pictures: &[Picture], kind: FrameKind, slice: SliceType) -> usize {
    pictures
        .iter()
        .filter(|p| p.kind == kind && p.slice == slice)
        .count()
}

#[test]
fn byte_stream_without_b_pyramid() {
    let label = "byte-stream, b-pyramid=false";
    let encoded = encode("flat", false, "byte-stream");
    let ours = check_against_h264parse(label, &encoded);
    assert!(
        count(&ours, FrameKind::NonReference, SliceType::B) > 0,
        "{label}: B frames"
    );
    assert_eq!(
        count(&ours, FrameKind::Reference, SliceType::B),
        0,
        "{label}: B frames are never referenced without a pyramid"
    );
    in_band_parameter_sets(label, &encoded);

    // Byte-stream → avc → byte-stream keeps every NAL unit.
    for au in &encoded.access_units {
        let back = avc_to_annexb(&annexb_to_avc(au, 4).unwrap(), 4).unwrap();
        let original: Vec<_> = nal_units(au, StreamFormat::ByteStream)
            .map(|n| n.unwrap().data)
            .collect();
        let round_trip: Vec<_> = nal_units(&back, StreamFormat::ByteStream)
            .map(|n| n.unwrap().data)
            .collect();
        assert_eq!(original, round_trip);
    }
}

#[test]
fn byte_stream_with_b_pyramid() {
    let label = "byte-stream, b-pyramid=true";
    let encoded = encode("pyramid", true, "byte-stream");
    let ours = check_against_h264parse(label, &encoded);
    assert!(
        count(&ours, FrameKind::Reference, SliceType::B) > 0,
        "{label}: reference B frames"
    );
    assert!(
        count(&ours, FrameKind::NonReference, SliceType::B) > 0,
        "{label}: non-reference B frames"
    );
    in_band_parameter_sets(label, &encoded);
}

#[test]
fn avc_with_b_pyramid() {
    let label = "avc, b-pyramid=true";
    let encoded = encode("avc", true, "avc");
    assert_eq!(encoded.format, StreamFormat::Avc { length_size: 4 });
    let ours = check_against_h264parse(label, &encoded);
    assert!(
        count(&ours, FrameKind::Reference, SliceType::B) > 0,
        "{label}"
    );
    assert!(
        count(&ours, FrameKind::NonReference, SliceType::B) > 0,
        "{label}"
    );

    let in_band = in_band_parameter_sets(label, &encoded);
    let codec_data = encoded.codec_data.as_deref().unwrap();
    let (from_caps, _) = ParameterSets::from_avcc(codec_data).unwrap();
    assert_eq!(
        from_caps, in_band,
        "{label}: codec_data holds the in-band sets"
    );
    // Ours matches h264parse's record plus the High-profile extension it leaves out
    // (4:2:0, 8-bit luma and chroma, no SPS extensions).
    let ours = in_band.avcc();
    assert_eq!(&ours[..codec_data.len()], codec_data);
    assert_eq!(&ours[codec_data.len()..], [0xfd, 0xf8, 0xf8, 0x00]);

    // avc → byte-stream → avc is lossless.
    for au in &encoded.access_units {
        let annex_b = avc_to_annexb(au, 4).unwrap();
        assert_eq!(&annexb_to_avc(&annex_b, 4).unwrap(), au);
        let info = classify(&annex_b, StreamFormat::ByteStream).unwrap();
        assert_eq!(info, classify(au, encoded.format).unwrap());
    }
}

/// What a [`StreamParser`] made of a whole encoded stream.
struct Validated {
    /// Keyframes at which the active sets changed.
    changes: usize,
    keyframes: usize,
}

/// Feeds every AU to a [`StreamParser`] (primed with codec_data when there is one, as the
/// sink is) and checks that it accepts all of them, classifies them as [`classify`] does and
/// ends up with exactly the stream's own SPS/PPS as active sets.
fn check_stream_parser(label: &str, encoded: &Encoded, size: (u32, u32)) -> Validated {
    assert_eq!(
        encoded.access_units.len(),
        FRAMES,
        "{label}: one AU per frame"
    );
    let mut parser = StreamParser::new();
    if let Some(record) = &encoded.codec_data {
        let length_size = parser
            .load_avcc(record)
            .unwrap_or_else(|e| panic!("{label}: codec_data refused: {e}"));
        assert_eq!(StreamFormat::Avc { length_size }, encoded.format);
    }
    let mut validated = Validated {
        changes: 0,
        keyframes: 0,
    };
    for (i, au) in encoded.access_units.iter().enumerate() {
        let parsed = parser
            .push(au, encoded.format)
            .unwrap_or_else(|e| panic!("{label}: AU {i} refused: {e}"));
        assert_eq!(
            parsed.info,
            classify(au, encoded.format).unwrap(),
            "{label}: AU {i}"
        );
        if parsed.info.kind == FrameKind::Key {
            validated.keyframes += 1;
            validated.changes += usize::from(parsed.active_changed);
        } else {
            assert!(!parsed.active_changed, "{label}: AU {i}");
        }
        if i == 0 {
            assert!(parsed.active_changed, "{label}: first AU activates");
        }
    }

    let active = parser.active().expect("active sets after a keyframe");
    let info = active.sps_info();
    assert_eq!((info.width, info.height), size, "{label}: active SPS size");
    // The active sets are the ones the first keyframe carries in-band (the encoders here
    // repeat the same SPS/PPS), in SPS-then-PPS order.
    let mut in_band: Vec<&[u8]> = nal_units(&encoded.access_units[0], encoded.format)
        .map(Result::unwrap)
        .filter(|n| matches!(n.nal_type, nal_type::SPS | nal_type::PPS))
        .map(|n| n.data)
        .collect();
    in_band.sort_by_key(|n| n[0] & 0x1f);
    assert_eq!(active.nal_units().collect::<Vec<_>>(), in_band, "{label}");
    let prefix: Vec<u8> = in_band
        .iter()
        .flat_map(|n| [&[0, 0, 0, 1][..], n].concat())
        .collect();
    assert_eq!(active.annexb_prefix(), prefix, "{label}: Annex B prefix");

    // h264parse's codec_data, less the high-profile extension it may leave out.
    if let Some(codec_data) = &encoded.codec_data {
        let ours = active.avcc();
        assert_eq!(&ours[..codec_data.len()], codec_data, "{label}: avcC");
        let extension = &ours[codec_data.len()..];
        assert!(
            extension.is_empty()
                || (extension.len() == 4 && matches!(info.profile_idc, 100 | 110 | 122)),
            "{label}: avcC tail {extension:02x?}"
        );
    }
    println!(
        "{label}: all {FRAMES} AUs accepted, {} keyframes, active {} (SPS {}, PPS {:?}), {} byte avcC",
        validated.keyframes,
        info.codec_string(),
        active.sps_id(),
        active.pps_ids().collect::<Vec<_>>(),
        active.avcc().len()
    );
    validated
}

/// One encoding to validate: label, raw caps, encoder, stream format, displayed size.
type Case = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    (u32, u32),
);

fn validate_cases(cases: &[Case]) {
    for &(label, raw, encoder, stream_format, size) in cases {
        let encoded = encode_with(
            &label.replace([' ', ',', '='], "-"),
            raw,
            encoder,
            stream_format,
        );
        let validated = check_stream_parser(label, &encoded, size);
        assert!(validated.keyframes > 0, "{label}");
        assert_eq!(validated.changes, 1, "{label}: the sets never change");
    }
}

#[test]
fn stream_parser_accepts_x264_gop_structures() {
    validate_cases(&[
        (
            "x264 no B-frames",
            "format=I420,width=320,height=240",
            "x264enc bframes=0 key-int-max=15",
            "byte-stream",
            (320, 240),
        ),
        (
            "x264 B-frames without pyramid",
            "format=I420,width=320,height=240",
            "x264enc bframes=3 key-int-max=15 b-pyramid=false",
            "byte-stream",
            (320, 240),
        ),
        (
            "x264 B-pyramid, weighted prediction, 5 refs",
            "format=I420,width=320,height=240",
            "x264enc bframes=3 key-int-max=30 b-pyramid=true weightb=true ref=5 option-string=weightp=2:direct=auto",
            "avc",
            (320, 240),
        ),
        (
            "x264 CAVLC B-frames",
            "format=I420,width=320,height=240",
            "x264enc bframes=2 key-int-max=15 cabac=false",
            "byte-stream",
            (320, 240),
        ),
        (
            "x264 zerolatency sliced threads",
            "format=I420,width=320,height=240",
            "x264enc tune=zerolatency sliced-threads=true threads=4 key-int-max=15",
            "byte-stream",
            (320, 240),
        ),
        (
            "x264 four slices per picture",
            "format=I420,width=320,height=240",
            "x264enc bframes=3 key-int-max=15 option-string=slices=4",
            "avc",
            (320, 240),
        ),
        (
            "x264 interlaced (MBAFF)",
            "format=I420,width=320,height=240",
            "interlace field-pattern=2:2 ! x264enc bframes=2 key-int-max=15 interlaced=true",
            "byte-stream",
            (320, 240),
        ),
        (
            "x264 intra refresh",
            "format=I420,width=320,height=240",
            "x264enc bframes=0 key-int-max=30 intra-refresh=true",
            "byte-stream",
            (320, 240),
        ),
        (
            "x264 sps-id 7",
            "format=I420,width=320,height=240",
            "x264enc bframes=3 key-int-max=15 sps-id=7",
            "avc",
            (320, 240),
        ),
    ]);
}

#[test]
fn stream_parser_accepts_x264_sizes_and_profiles() {
    validate_cases(&[
        (
            "x264 176x144 baseline",
            "format=I420,width=176,height=144",
            "x264enc key-int-max=15 ! video/x-h264,profile=baseline",
            "byte-stream",
            (176, 144),
        ),
        (
            "x264 640x360 main (cropped)",
            "format=I420,width=640,height=360",
            "x264enc bframes=3 key-int-max=15 ! video/x-h264,profile=main",
            "avc",
            (640, 360),
        ),
        (
            "x264 1280x720",
            "format=I420,width=1280,height=720",
            "x264enc bframes=3 key-int-max=24 speed-preset=ultrafast",
            "avc",
            (1280, 720),
        ),
        (
            "x264 odd 322x242",
            "format=I420,width=322,height=242",
            "x264enc bframes=1 key-int-max=15",
            "byte-stream",
            (322, 242),
        ),
        (
            "x264 High 10",
            "format=I420_10LE,width=320,height=240",
            "x264enc bframes=3 key-int-max=15",
            "byte-stream",
            (320, 240),
        ),
        (
            "x264 High 4:2:2",
            "format=Y42B,width=320,height=240",
            "x264enc bframes=3 key-int-max=15",
            "avc",
            (320, 240),
        ),
        (
            "x264 High 4:4:4",
            "format=Y444,width=320,height=240",
            "x264enc bframes=3 key-int-max=15",
            "byte-stream",
            (320, 240),
        ),
    ]);
}

#[test]
fn stream_parser_accepts_openh264() {
    validate_cases(&[
        (
            "openh264 320x240",
            "format=I420,width=320,height=240",
            "openh264enc gop-size=15",
            "byte-stream",
            (320, 240),
        ),
        (
            "openh264 640x360 avc",
            "format=I420,width=640,height=360",
            "openh264enc gop-size=24",
            "avc",
            (640, 360),
        ),
        (
            "openh264 1280x720 four slices",
            "format=I420,width=1280,height=720",
            "openh264enc gop-size=30 slice-mode=n-slices num-slices=4",
            "byte-stream",
            (1280, 720),
        ),
    ]);
}

/// The classic three x264 streams through the parser too, next to the h264parse cross-check.
#[test]
fn stream_parser_matches_h264parse_on_b_pyramid() {
    for (label, stream_format) in [
        ("pyramid byte-stream", "byte-stream"),
        ("pyramid avc", "avc"),
    ] {
        let encoded = encode(&label.replace(' ', "-"), true, stream_format);
        check_against_h264parse(label, &encoded);
        let validated = check_stream_parser(label, &encoded, (320, 240));
        assert_eq!(validated.changes, 1);
    }
}

/// Splices the Annex B access unit `au` with `nal` inserted before its first slice.
fn insert_before_slice(au: &[u8], nal: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut inserted = false;
    for n in nal_units(au, StreamFormat::ByteStream) {
        let n = n.unwrap();
        if !inserted && matches!(n.nal_type, 1 | 5) {
            out.extend_from_slice(&[0, 0, 0, 1]);
            out.extend_from_slice(nal);
            inserted = true;
        }
        out.extend_from_slice(&[0, 0, 0, 1]);
        out.extend_from_slice(n.data);
    }
    out
}

#[test]
fn real_stream_with_a_bogus_sps_or_a_garbled_keyframe() {
    const BOGUS_SPS: [u8; 12] = [
        0x67, 0x42, 0x12, 0x50, 0x42, 0x7f, 0x36, 0xef, 0xd0, 0x62, 0x72, 0x40,
    ];
    let label = "x264 with bad units";
    let encoded = encode("bad-units", true, "byte-stream");
    let mut parser = StreamParser::new();
    let mut refused = Vec::new();
    let mut noise = 0x2545_f491_4f6c_dd1du64;
    let mut keyframes = 0;
    for (i, au) in encoded.access_units.iter().enumerate() {
        let key = classify(au, StreamFormat::ByteStream).unwrap().kind == FrameKind::Key;
        keyframes += usize::from(key);
        if key && keyframes == 3 {
            // The bogus SPS inside a keyframe, as it was found: refused as a whole.
            let with_bogus = insert_before_slice(au, &BOGUS_SPS);
            assert!(parser.push(&with_bogus, StreamFormat::ByteStream).is_err());
            refused.push(i);
        }
        if key && keyframes == 5 {
            // The keyframe's slice data replaced by noise after its NAL header.
            let mut garbled = Vec::new();
            for n in nal_units(au, StreamFormat::ByteStream) {
                let n = n.unwrap();
                garbled.extend_from_slice(&[0, 0, 0, 1]);
                if n.nal_type == 5 {
                    garbled.push(n.data[0]);
                    garbled.extend((1..n.data.len()).map(|_| {
                        noise ^= noise << 13;
                        noise ^= noise >> 7;
                        noise ^= noise << 17;
                        // Keep start codes out of the noise.
                        (noise as u8) | 0x10
                    }));
                } else {
                    garbled.extend_from_slice(n.data);
                }
            }
            assert!(parser.push(&garbled, StreamFormat::ByteStream).is_err());
            refused.push(i);
        }
        let parsed = parser
            .push(au, StreamFormat::ByteStream)
            .unwrap_or_else(|e| panic!("{label}: AU {i}: {e}"));
        assert_eq!(parsed.active_changed, i == 0, "{label}: AU {i}");
    }
    assert_eq!(refused.len(), 2);
    let active = parser.active().unwrap();
    assert_eq!(active.sps_id(), 0);
    assert_eq!(active.pps_ids().collect::<Vec<_>>(), [0]);
    assert_eq!(active.sps_info().level_idc, 20);
}

#[test]
fn real_resolution_change_switches_the_active_sets() {
    let small = encode_with(
        "switch-small",
        "format=I420,width=320,height=240",
        "x264enc bframes=2 key-int-max=15",
        "byte-stream",
    );
    let large = encode_with(
        "switch-large",
        "format=I420,width=640,height=360",
        "x264enc bframes=2 key-int-max=15",
        "byte-stream",
    );
    let mut parser = StreamParser::new();
    let mut changes = Vec::new();
    for (i, au) in small
        .access_units
        .iter()
        .chain(&large.access_units)
        .enumerate()
    {
        let parsed = parser
            .push(au, StreamFormat::ByteStream)
            .unwrap_or_else(|e| panic!("AU {i}: {e}"));
        if parsed.active_changed {
            changes.push(i);
        }
        if i == FRAMES - 1 {
            let info = parser.sps_info().unwrap();
            assert_eq!((info.width, info.height), (320, 240));
        }
    }
    // Same SPS id, new content: the active sets switch at the new stream's first keyframe.
    assert_eq!(changes, [0, FRAMES]);
    let active = parser.active().unwrap();
    assert_eq!(active.sps_id(), 0);
    let info = active.sps_info();
    assert_eq!((info.width, info.height), (640, 360));
    let first = &large.access_units[0];
    let in_band: Vec<u8> = nal_units(first, StreamFormat::ByteStream)
        .map(Result::unwrap)
        .filter(|n| matches!(n.nal_type, nal_type::SPS | nal_type::PPS))
        .flat_map(|n| [&[0, 0, 0, 1][..], n.data].concat())
        .collect();
    assert_eq!(active.annexb_prefix(), in_band);
}
