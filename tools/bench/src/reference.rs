//! The reference stream: encoded once, stored as access units, played out live by every
//! system. Each AU carries its frame id in an SEI message so a receiver can identify it
//! whatever the transport (MoQ, MPEG-TS over SRT, RTP).

use std::io::{self, Read, Write};
use std::path::Path;
use std::time::Duration;

use gst::prelude::*;
use h264::{FrameKind, StreamFormat};

/// Marks our SEI (user data unregistered). No zero byte, so no emulation prevention.
const UUID: [u8; 16] = *b"moq-bench-frame!";

/// One access unit of the reference stream, in decode order.
#[derive(Debug, Clone)]
pub struct Au {
    pub pts_ns: u64,
    pub dts_ns: u64,
    pub kind: FrameKind,
    pub data: Vec<u8>,
}

/// Where a play-out of `aus` starts: their earliest timestamp, ns.
pub fn start_ns(aus: &[Au]) -> u64 {
    aus.iter()
        .map(|a| a.dts_ns.min(a.pts_ns))
        .min()
        .unwrap_or(0)
}

/// How many access units (a prefix: they are in decode order) fall due within `within` of a
/// play-out's start.
pub fn due_within(aus: &[Au], within: Duration) -> usize {
    let start = start_ns(aus);
    aus.partition_point(|au| Duration::from_nanos(au.dts_ns.saturating_sub(start)) < within)
}

/// How a reference is encoded: the picture, the noise patch over it (its side and
/// position; noise keeps every frame different, so x264 reaches its target rate) and
/// x264enc's settings.
#[derive(Debug, Clone, Copy)]
pub struct Encoding<'a> {
    pub width: u32,
    pub height: u32,
    pub patch: (u32, u32, u32),
    pub x264: &'a str,
}

/// The benchmark's reference: ~600 kbit/s, 24 fps, 320x240, GoP 15, up to 3 B frames.
pub const BENCH: Encoding<'static> = Encoding {
    width: 320,
    height: 240,
    patch: (96, 100, 80),
    x264: "bitrate=600 bframes=3 key-int-max=15 speed-preset=veryfast option-string=scenecut=0",
};

/// Encodes `seconds` of the reference content (a noise patch over a moving ball, so x264
/// reaches its target rate) at ~600 kbit/s, 24 fps, GoP 15, up to 3 B frames.
pub fn encode(seconds: u64) -> Result<Vec<Au>, String> {
    encode_with(seconds, &BENCH)
}

/// Encodes `seconds` of the reference content at 24 fps with `encoding`.
pub fn encode_with(seconds: u64, encoding: &Encoding<'_>) -> Result<Vec<Au>, String> {
    let frames = seconds * 24;
    let Encoding {
        width,
        height,
        patch: (side, x, y),
        x264,
    } = encoding;
    let description = format!(
        "compositor name=mix sink_1::xpos={x} sink_1::ypos={y} \
         ! video/x-raw,format=I420,width={width},height={height},framerate=24/1 \
         ! x264enc {x264} \
         ! h264parse ! video/x-h264,stream-format=byte-stream,alignment=au ! appsink name=out sync=false \
         videotestsrc num-buffers={frames} pattern=ball ! video/x-raw,format=I420,width={width},height={height},framerate=24/1 ! mix.sink_0 \
         videotestsrc num-buffers={frames} pattern=snow ! video/x-raw,format=I420,width={side},height={side},framerate=24/1 ! mix.sink_1"
    );
    let pipeline = gst::parse::launch(&description)
        .map_err(|e| format!("reference encoder: {e}"))?
        .downcast::<gst::Pipeline>()
        .map_err(|_| "not a pipeline")?;
    let sink = pipeline
        .by_name("out")
        .and_downcast::<gst_app::AppSink>()
        .ok_or("no appsink")?;
    pipeline
        .set_state(gst::State::Playing)
        .map_err(|e| format!("reference encoder: {e}"))?;
    let mut aus = Vec::new();
    while let Ok(sample) = sink.pull_sample() {
        let buffer = sample.buffer().ok_or("sample without buffer")?;
        let map = buffer.map_readable().map_err(|e| e.to_string())?;
        let kind = h264::classify(&map, StreamFormat::ByteStream)
            .map_err(|e| format!("reference AU {}: {e}", aus.len()))?
            .kind;
        let pts_ns = buffer.pts().map_or(0, |t| t.nseconds());
        aus.push(Au {
            pts_ns,
            dts_ns: buffer.dts().map_or(pts_ns, |t| t.nseconds()),
            kind,
            data: map.to_vec(),
        });
    }
    let _ = pipeline.set_state(gst::State::Null);
    if aus.len() as u64 != frames {
        return Err(format!(
            "reference encoder gave {} of {frames} frames",
            aus.len()
        ));
    }
    Ok(aus)
}

fn kind_code(kind: FrameKind) -> u8 {
    match kind {
        FrameKind::Key => 0,
        FrameKind::Reference => 1,
        FrameKind::NonReference => 2,
    }
}

pub fn kind_name(kind: FrameKind) -> &'static str {
    match kind {
        FrameKind::Key => "key",
        FrameKind::Reference => "reference",
        FrameKind::NonReference => "non-reference",
    }
}

/// The kind [`kind_name`] names.
pub fn kind_from_name(name: &str) -> Option<FrameKind> {
    [
        FrameKind::Key,
        FrameKind::Reference,
        FrameKind::NonReference,
    ]
    .into_iter()
    .find(|k| kind_name(*k) == name)
}

/// Writes AUs as `[pts u64][dts u64][kind u8][len u32][bytes]`, little endian.
pub fn save(aus: &[Au], path: &Path) -> io::Result<()> {
    let mut out = io::BufWriter::new(std::fs::File::create(path)?);
    for au in aus {
        out.write_all(&au.pts_ns.to_le_bytes())?;
        out.write_all(&au.dts_ns.to_le_bytes())?;
        out.write_all(&[kind_code(au.kind)])?;
        out.write_all(&(au.data.len() as u32).to_le_bytes())?;
        out.write_all(&au.data)?;
    }
    out.flush()
}

pub fn load(path: &Path) -> io::Result<Vec<Au>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?.read_to_end(&mut bytes)?;
    let bad = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is truncated", path.display()),
        )
    };
    let mut aus = Vec::new();
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        let take = |rest: &mut &[u8], n: usize| -> io::Result<Vec<u8>> {
            let (head, tail) = rest.split_at_checked(n).ok_or_else(bad)?;
            *rest = tail;
            Ok(head.to_vec())
        };
        let pts_ns = u64::from_le_bytes(take(&mut rest, 8)?.try_into().expect("8 bytes"));
        let dts_ns = u64::from_le_bytes(take(&mut rest, 8)?.try_into().expect("8 bytes"));
        let kind = match take(&mut rest, 1)?[0] {
            0 => FrameKind::Key,
            1 => FrameKind::Reference,
            _ => FrameKind::NonReference,
        };
        let len = u32::from_le_bytes(take(&mut rest, 4)?.try_into().expect("4 bytes")) as usize;
        let data = take(&mut rest, len)?;
        aus.push(Au {
            pts_ns,
            dts_ns,
            kind,
            data,
        });
    }
    Ok(aus)
}

/// What a receiver reads from an AU's tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tag {
    pub id: u64,
    /// The AU's slices are exactly the bytes the sender tagged.
    pub intact: bool,
}

/// FNV-1a over an AU's slice NAL units, each without trailing zero bytes (stuffing a
/// transport may add or drop): the bytes a decoder turns into the picture, whatever the
/// stream format.
fn slice_digest(au: &[u8], format: StreamFormat) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    for nal in h264::nal_units(au, format)
        .filter_map(Result::ok)
        .filter(|n| matches!(n.nal_type, 1 | 5))
    {
        let end = nal.data.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
        for b in &nal.data[..end] {
            hash = (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

/// What [`tag`] adds to a byte-stream AU: start code, NAL and SEI headers, UUID, two
/// 16-digit hex numbers, stop bit.
pub const TAG_BYTES: usize = 7 + UUID.len() + 32 + 1;

/// The byte-stream AU with an SEI carrying `id` and the digest of its slices inserted
/// before its first slice.
pub fn tag(au: &[u8], id: u64) -> Vec<u8> {
    tag_in(au, id, StreamFormat::ByteStream)
}

/// [`tag`] for an AU in `format` (byte-stream, or AVC with its NAL length size).
pub fn tag_in(au: &[u8], id: u64, format: StreamFormat) -> Vec<u8> {
    let first_slice = h264::nal_units(au, format)
        .filter_map(Result::ok)
        .find(|n| matches!(n.nal_type, 1 | 5))
        .map(|n| n.data.as_ptr() as usize - au.as_ptr() as usize);
    // Hex digits: the payload has no zero byte, so it needs no emulation prevention.
    let payload = format!("{id:016x}{:016x}", slice_digest(au, format));
    let mut sei = vec![0x06, 0x05, (UUID.len() + payload.len()) as u8];
    sei.extend_from_slice(&UUID);
    sei.extend_from_slice(payload.as_bytes());
    sei.push(0x80);
    // Back up over the slice's start code (00 00 01, or 00 00 00 01) or length.
    let (at, prefix) = match format {
        StreamFormat::ByteStream => {
            let at = first_slice.map_or(0, |o| {
                let o = o - 3;
                if o > 0 && au[o - 1] == 0 { o - 1 } else { o }
            });
            (at, vec![0, 0, 0, 1])
        }
        StreamFormat::Avc { length_size } => {
            let size = usize::from(length_size);
            let at = first_slice.map_or(0, |o| o - size);
            let length = (sei.len() as u32).to_be_bytes();
            (at, length[4 - size..].to_vec())
        }
    };
    let mut out = Vec::with_capacity(au.len() + prefix.len() + sei.len());
    out.extend_from_slice(&au[..at]);
    out.extend_from_slice(&prefix);
    out.extend_from_slice(&sei);
    out.extend_from_slice(&au[at..]);
    out
}

/// The tag of an AU, if it has one, checked against the slices that came with it.
pub fn read_tag(au: &[u8]) -> Option<Tag> {
    let at = au.windows(UUID.len()).position(|w| w == UUID)? + UUID.len();
    let hex = |range: std::ops::Range<usize>| {
        let text = std::str::from_utf8(au.get(range)?).ok()?;
        u64::from_str_radix(text, 16).ok()
    };
    let id = hex(at..at + 16)?;
    let digest = hex(at + 16..at + 32);
    Some(Tag {
        id,
        intact: digest == Some(slice_digest(au, StreamFormat::ByteStream)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_survive_and_keep_the_au_parseable() {
        // SPS-less IDR slice behind a 4-byte start code, then a 3-byte start code slice.
        let au = [0, 0, 0, 1, 0x65, 0x88, 0x84, 0, 0, 1, 0x41, 0x9a];
        let tagged = tag(&au, 0x1234_5678_9abc);
        assert_eq!(tagged.len(), au.len() + TAG_BYTES);
        let intact = Tag {
            id: 0x1234_5678_9abc,
            intact: true,
        };
        assert_eq!(read_tag(&tagged), Some(intact));
        let kinds: Vec<u8> = h264::nal_units(&tagged, StreamFormat::ByteStream)
            .map(|n| n.unwrap().nal_type)
            .collect();
        assert_eq!(kinds, [6, 5, 1], "SEI first, slices intact");
        assert_eq!(read_tag(&au), None);
        // Stuffing after a slice does not matter; any changed slice byte does.
        let mut stuffed = tagged.clone();
        stuffed.extend_from_slice(&[0, 0]);
        assert_eq!(read_tag(&stuffed), Some(intact));
        for i in [tagged.len() - 1, tagged.len() - 6] {
            let mut damaged = tagged.clone();
            damaged[i] ^= 0x10;
            assert_eq!(
                read_tag(&damaged),
                Some(Tag {
                    intact: false,
                    ..intact
                }),
                "byte {i} changed"
            );
        }
        // A missing slice is damage too.
        let truncated = &tagged[..tagged.len() - 5];
        assert!(!read_tag(truncated).unwrap().intact);
    }

    #[test]
    fn an_avc_tag_reads_back_from_the_same_au_in_byte_stream() {
        let slices: [&[u8]; 2] = [&[0x65, 0x88, 0x84], &[0x41, 0x9a]];
        let (mut avc, mut annex_b) = (Vec::new(), Vec::new());
        for nal in slices {
            avc.extend_from_slice(&(nal.len() as u32).to_be_bytes());
            avc.extend_from_slice(nal);
            annex_b.extend_from_slice(&[0, 0, 0, 1]);
            annex_b.extend_from_slice(nal);
        }
        let format = StreamFormat::Avc { length_size: 4 };
        let tagged = tag_in(&avc, 7, format);
        assert_eq!(tagged.len(), avc.len() + TAG_BYTES);
        let kinds: Vec<u8> = h264::nal_units(&tagged, format)
            .map(|n| n.unwrap().nal_type)
            .collect();
        assert_eq!(kinds, [6, 5, 1], "SEI first, slices intact");
        // What a depayloader makes of it: the same NAL units behind start codes.
        let mut converted = Vec::new();
        for nal in h264::nal_units(&tagged, format) {
            converted.extend_from_slice(&[0, 0, 0, 1]);
            converted.extend_from_slice(nal.unwrap().data);
        }
        assert_eq!(converted, tag(&annex_b, 7));
        assert_eq!(
            read_tag(&converted),
            Some(Tag {
                id: 7,
                intact: true
            })
        );
        assert_eq!(
            kind_from_name(kind_name(FrameKind::Key)),
            Some(FrameKind::Key)
        );
        assert_eq!(kind_from_name(""), None);
    }

    #[test]
    fn aus_round_trip_through_the_file() {
        let aus = vec![
            Au {
                pts_ns: 5,
                dts_ns: 1,
                kind: FrameKind::Key,
                data: vec![0, 0, 1, 0x65],
            },
            Au {
                pts_ns: 9,
                dts_ns: 2,
                kind: FrameKind::NonReference,
                data: vec![0, 0, 1, 0x01, 7],
            },
        ];
        let path = std::env::temp_dir().join(format!("moq-bench-ref-{}.bin", std::process::id()));
        save(&aus, &path).unwrap();
        let back = load(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(
            (back[1].pts_ns, back[1].dts_ns, back[1].kind),
            (9, 2, FrameKind::NonReference)
        );
        assert_eq!(back[1].data, aus[1].data);
    }
}
