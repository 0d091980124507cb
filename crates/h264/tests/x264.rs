//! Classification of real x264 output, checked frame by frame against h264parse's own
//! reading of the same stream.
//!
//! Each test encodes 120 frames with `x264enc`, lets `h264parse` deliver access units to
//! `multifilesink` (one file per buffer, so one file per AU exactly as the sink element would
//! receive it) and logs what h264parse parsed. The tests fail, rather than skip, when the
//! GStreamer tools or elements are missing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use h264::{
    FrameKind, ParameterSets, SliceType, StreamFormat, annexb_to_avc, avc_to_annexb, classify,
    nal_units,
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

fn require_gstreamer() {
    for tool in ["gst-launch-1.0", "gst-inspect-1.0"] {
        let found = Command::new(tool).arg("--version").output();
        assert!(
            found.is_ok_and(|out| out.status.success()),
            "{tool} is not available; {INSTALL_HINT}"
        );
    }
    for element in ["videotestsrc", "x264enc", "h264parse", "multifilesink"] {
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
    require_gstreamer();
    let dir = TempDir::new(name);
    let pipeline = [
        format!("videotestsrc num-buffers={FRAMES} pattern=ball"),
        "video/x-raw,format=I420,width=320,height=240,framerate=24/1".into(),
        format!("x264enc bframes=3 key-int-max=15 b-pyramid={b_pyramid}"),
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
