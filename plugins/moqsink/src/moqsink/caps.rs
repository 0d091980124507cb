//! What each kind of sink pad accepts, and the stream parameters its caps give.

use h264::StreamFormat;
use moq_media::audio::{AacConfig, OpusHead};

use super::audio::AudioParams;
pub use super::publisher::MediaKind;
use super::video::StreamParams;

/// What pads of `kind` accept.
pub fn pad_caps(kind: MediaKind) -> gst::Caps {
    match kind {
        MediaKind::Video => gst::Caps::builder("video/x-h264")
            .field("stream-format", gst::List::new(["byte-stream", "avc"]))
            .field("alignment", "au")
            .build(),
        MediaKind::Audio => {
            let mut caps = gst::Caps::new_empty_simple("audio/x-opus");
            caps.merge(
                gst::Caps::builder("audio/mpeg")
                    .field("mpegversion", 4i32)
                    .field("stream-format", "raw")
                    .build(),
            );
            caps
        }
    }
}

/// Video caps: the stream format, the frame rate, and for `avc` the `codec_data` to load.
pub fn video_params(s: &gst::StructureRef) -> Result<(StreamParams, Option<gst::Buffer>), String> {
    if s.name() != "video/x-h264" {
        return Err(format!("{} is not video moqsink carries (H.264)", s.name()));
    }
    if let Ok(alignment) = s.get::<&str>("alignment")
        && alignment != "au"
    {
        return Err(format!(
            "H.264 must come in access units (alignment=au, e.g. after h264parse), not {alignment}"
        ));
    }
    let codec_data = s.get::<gst::Buffer>("codec_data").ok();
    let format = match s.get::<&str>("stream-format") {
        Ok("avc3") => {
            return Err("H.264 stream-format avc3 is not carried: use avc or byte-stream".into());
        }
        Ok("avc") => {
            let data = codec_data
                .as_ref()
                .ok_or("avc caps without codec_data")?
                .map_readable()
                .map_err(|_| "unreadable codec_data")?;
            let (_, length_size) = h264::ParameterSets::from_avcc(&data)
                .map_err(|e| format!("invalid codec_data: {e}"))?;
            StreamFormat::Avc { length_size }
        }
        _ => StreamFormat::ByteStream,
    };
    let framerate = s
        .get::<gst::Fraction>("framerate")
        .ok()
        .filter(|f| f.numer() > 0 && f.denom() > 0)
        .map(|f| [f.numer() as u32, f.denom() as u32]);
    let params = StreamParams {
        format: Some(format),
        framerate,
        ..StreamParams::default()
    };
    let avcc = codec_data.filter(|_| matches!(format, StreamFormat::Avc { .. }));
    Ok((params, avcc))
}

/// Audio caps: Opus (its OpusHead from `streamheader`, or built from the caps' channel
/// fields) or raw AAC (its AudioSpecificConfig from `codec_data`).
pub fn audio_params(s: &gst::StructureRef) -> Result<AudioParams, String> {
    let positive = |field: &str| {
        s.get::<i32>(field)
            .ok()
            .and_then(|v| u32::try_from(v).ok())
            .filter(|v| *v > 0)
    };
    match s.name().as_str() {
        "audio/x-opus" => {
            let rate = positive("rate").unwrap_or(48_000);
            let head = match opus_streamheader(s) {
                Some(bytes) => OpusHead::parse(&bytes).map_err(|e| e.to_string())?,
                None => opus_head_from_fields(s, rate)?,
            };
            Ok(AudioParams {
                codec: "opus".into(),
                sample_rate: rate,
                channels: u32::from(head.channels),
                config: head.to_bytes(),
                label: None,
            })
        }
        "audio/mpeg" => {
            if s.get::<&str>("stream-format").ok() != Some("raw") {
                return Err("AAC must be raw (stream-format=raw, e.g. after aacparse)".into());
            }
            let data = s
                .get::<gst::Buffer>("codec_data")
                .map_err(|_| "raw AAC caps without codec_data (the AudioSpecificConfig)")?;
            let asc = data
                .map_readable()
                .map_err(|_| "unreadable codec_data")?
                .to_vec();
            let config = AacConfig::parse(&asc).map_err(|e| e.to_string())?;
            Ok(AudioParams {
                codec: config.codec_string(),
                sample_rate: positive("rate").unwrap_or(config.sample_rate),
                channels: positive("channels").unwrap_or(u32::from(config.channel_count())),
                config: asc,
                label: None,
            })
        }
        other => Err(format!("{other} is not audio moqsink carries")),
    }
}

/// The OpusHead packet: the first buffer of `streamheader`, as opusenc sets it.
fn opus_streamheader(s: &gst::StructureRef) -> Option<Vec<u8>> {
    let headers = s.get::<gst::ArrayRef>("streamheader").ok()?;
    let first = headers.as_slice().first()?.get::<gst::Buffer>().ok()?;
    let bytes = first.map_readable().ok()?.to_vec();
    Some(bytes)
}

fn opus_head_from_fields(s: &gst::StructureRef, rate: u32) -> Result<OpusHead, String> {
    let int = |field: &str| s.get::<i32>(field).ok();
    let byte = |v: i32, what: &str| u8::try_from(v).map_err(|_| format!("opus {what} {v}"));
    let channels = byte(int("channels").unwrap_or(2), "channels")?;
    let mut head = OpusHead::simple(channels, rate);
    let family = byte(int("channel-mapping-family").unwrap_or(0), "mapping family")?;
    if family != 0 {
        head.mapping_family = family;
        head.stream_count = byte(int("stream-count").unwrap_or(0), "stream count")?;
        head.coupled_count = byte(int("coupled-count").unwrap_or(0), "coupled count")?;
        head.mapping = s
            .get::<gst::ArrayRef>("channel-mapping")
            .map_err(|_| "opus caps with a channel mapping family but no channel-mapping")?
            .as_slice()
            .iter()
            .map(|v| byte(v.get::<i32>().unwrap_or(-1), "channel mapping"))
            .collect::<Result<_, _>>()?;
    }
    // Validated as a receiver would read it.
    OpusHead::parse(&head.to_bytes()).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use gst::prelude::*;

    fn init() {
        gst::init().unwrap();
    }

    #[test]
    fn opus_caps_from_opusenc_and_from_fields() {
        init();
        let head = OpusHead::simple(2, 48_000).to_bytes();
        let caps = gst::Caps::builder("audio/x-opus")
            .field("rate", 48_000i32)
            .field("channels", 2i32)
            .field(
                "streamheader",
                gst::Array::new([gst::Buffer::from_slice(head.clone()).to_send_value()]),
            )
            .build();
        let p = audio_params(caps.structure(0).unwrap()).unwrap();
        assert_eq!(
            (p.codec.as_str(), p.sample_rate, p.channels),
            ("opus", 48_000, 2)
        );
        assert_eq!(p.config, head);
        let fields = gst::Caps::builder("audio/x-opus")
            .field("rate", 48_000i32)
            .field("channels", 3i32)
            .field("channel-mapping-family", 1i32)
            .field("stream-count", 2i32)
            .field("coupled-count", 1i32)
            .field("channel-mapping", gst::Array::new([0i32, 2, 1]))
            .build();
        let p = audio_params(fields.structure(0).unwrap()).unwrap();
        let parsed = OpusHead::parse(&p.config).unwrap();
        assert_eq!((parsed.channels, parsed.stream_count), (3, 2));
        let bad = gst::Caps::builder("audio/x-opus")
            .field("channels", 3i32)
            .build();
        assert!(audio_params(bad.structure(0).unwrap()).is_err());
    }

    #[test]
    fn aac_must_be_raw_with_its_config() {
        init();
        let raw = gst::Caps::builder("audio/mpeg")
            .field("mpegversion", 4i32)
            .field("stream-format", "raw")
            .field("codec_data", gst::Buffer::from_slice([0x11u8, 0x90]))
            .build();
        let p = audio_params(raw.structure(0).unwrap()).unwrap();
        assert_eq!(
            (p.codec.as_str(), p.sample_rate, p.channels),
            ("mp4a.40.2", 48_000, 2)
        );
        let adts = gst::Caps::builder("audio/mpeg")
            .field("mpegversion", 4i32)
            .field("stream-format", "adts")
            .build();
        assert!(audio_params(adts.structure(0).unwrap()).is_err());
        let no_config = gst::Caps::builder("audio/mpeg")
            .field("mpegversion", 4i32)
            .field("stream-format", "raw")
            .build();
        assert!(audio_params(no_config.structure(0).unwrap()).is_err());
    }

    #[test]
    fn templates_and_names() {
        assert_eq!(MediaKind::of_template("audio_%u"), Some(MediaKind::Audio));
        assert_eq!(MediaKind::of_template("sink"), None);
        assert_eq!(MediaKind::Video.default_track_name(0), "video");
        assert_eq!(MediaKind::Audio.default_track_name(2), "audio-2");
    }
}
