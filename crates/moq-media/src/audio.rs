//! Audio tracks: the codec configurations a catalog carries (Opus's identification
//! header, AAC's AudioSpecificConfig) and how the sender groups frames.
//!
//! Audio is small and must never stall, so it travels above every video stream and is
//! never held back for video. Every audio frame decodes on its own: its frame header says
//! `Key`, its decode index counts audio frames, and its base group is the audio group.

use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum AudioConfigError {
    #[error("Opus identification header: {0}")]
    Opus(&'static str),
    #[error("AudioSpecificConfig: {0}")]
    Aac(&'static str),
}

/// Opus's identification header (RFC 7845 §5.1), as Ogg and Matroska carry it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpusHead {
    pub channels: u8,
    /// Samples (at 48 kHz) the decoder discards at the start.
    pub pre_skip: u16,
    /// Sample rate of the original input, for information.
    pub input_rate: u32,
    /// Q7.8 dB.
    pub output_gain: i16,
    pub mapping_family: u8,
    /// With a mapping family other than 0: streams, coupled streams, and the channel map.
    pub stream_count: u8,
    pub coupled_count: u8,
    pub mapping: Vec<u8>,
}

const OPUS_MAGIC: &[u8; 8] = b"OpusHead";

impl OpusHead {
    /// The header of a mono or stereo stream (mapping family 0).
    pub fn simple(channels: u8, input_rate: u32) -> OpusHead {
        OpusHead {
            channels,
            pre_skip: 0,
            input_rate,
            output_gain: 0,
            mapping_family: 0,
            stream_count: 1,
            coupled_count: u8::from(channels > 1),
            mapping: Vec::new(),
        }
    }

    pub fn parse(data: &[u8]) -> Result<OpusHead, AudioConfigError> {
        let err = AudioConfigError::Opus;
        if data.len() < 19 || &data[..8] != OPUS_MAGIC {
            return Err(err("not an OpusHead packet"));
        }
        if data[8] >> 4 != 0 {
            return Err(err("unsupported version"));
        }
        let channels = data[9];
        if channels == 0 {
            return Err(err("zero channels"));
        }
        let mut head = OpusHead {
            channels,
            pre_skip: u16::from_le_bytes([data[10], data[11]]),
            input_rate: u32::from_le_bytes([data[12], data[13], data[14], data[15]]),
            output_gain: i16::from_le_bytes([data[16], data[17]]),
            mapping_family: data[18],
            stream_count: 1,
            coupled_count: u8::from(channels > 1),
            mapping: Vec::new(),
        };
        if head.mapping_family == 0 {
            if channels > 2 {
                return Err(err("mapping family 0 with more than two channels"));
            }
            return Ok(head);
        }
        let table = data
            .get(19..21 + usize::from(channels))
            .ok_or(err("channel mapping table truncated"))?;
        head.stream_count = table[0];
        head.coupled_count = table[1];
        head.mapping = table[2..].to_vec();
        let decoded = u16::from(head.stream_count) + u16::from(head.coupled_count);
        if head.stream_count == 0 || head.coupled_count > head.stream_count || decoded > 255 {
            return Err(err("inconsistent stream counts"));
        }
        if head
            .mapping
            .iter()
            .any(|&m| m != 255 && u16::from(m) >= decoded)
        {
            return Err(err("channel mapped to a stream that does not exist"));
        }
        Ok(head)
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = OPUS_MAGIC.to_vec();
        out.push(1);
        out.push(self.channels);
        out.extend_from_slice(&self.pre_skip.to_le_bytes());
        out.extend_from_slice(&self.input_rate.to_le_bytes());
        out.extend_from_slice(&self.output_gain.to_le_bytes());
        out.push(self.mapping_family);
        if self.mapping_family != 0 {
            out.push(self.stream_count);
            out.push(self.coupled_count);
            out.extend_from_slice(&self.mapping);
        }
        out
    }
}

/// The fields of an MPEG-4 AudioSpecificConfig a receiver needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AacConfig {
    /// Audio object type (2: AAC-LC).
    pub object_type: u8,
    pub sample_rate: u32,
    /// Channel configuration (0: defined in the stream).
    pub channels: u8,
}

const AAC_RATES: [u32; 13] = [
    96_000, 88_200, 64_000, 48_000, 44_100, 32_000, 24_000, 22_050, 16_000, 12_000, 11_025, 8_000,
    7_350,
];

impl AacConfig {
    pub fn parse(asc: &[u8]) -> Result<AacConfig, AudioConfigError> {
        let err = AudioConfigError::Aac;
        // At most 43 bits are read: a u64 of the first bytes holds them.
        let mut word = [0u8; 8];
        let n = asc.len().min(8);
        word[..n].copy_from_slice(&asc[..n]);
        let bits = u64::from_be_bytes(word);
        let available = 8 * n as u32;
        let mut pos = 0u32;
        let mut take = |count: u32| -> Result<u32, AudioConfigError> {
            if pos + count > available {
                return Err(err("truncated"));
            }
            let v = (bits >> (64 - pos - count)) & ((1 << count) - 1);
            pos += count;
            Ok(v as u32)
        };
        let mut object_type = take(5)?;
        if object_type == 31 {
            object_type = 32 + take(6)?;
        }
        if object_type == 0 {
            return Err(err("object type 0"));
        }
        let sample_rate = match take(4)? {
            15 => take(24)?,
            i => *AAC_RATES
                .get(i as usize)
                .ok_or(err("reserved sampling frequency index"))?,
        };
        if sample_rate == 0 {
            return Err(err("zero sample rate"));
        }
        let channels = take(4)?;
        if channels > 7 {
            return Err(err("reserved channel configuration"));
        }
        Ok(AacConfig {
            object_type: object_type as u8,
            sample_rate,
            channels: channels as u8,
        })
    }

    /// RFC 6381 codec string, e.g. `mp4a.40.2`.
    pub fn codec_string(&self) -> String {
        format!("mp4a.40.{}", self.object_type)
    }

    /// Channels the configuration stands for (configuration 7 is 7.1: eight).
    pub fn channel_count(&self) -> u8 {
        match self.channels {
            7 => 8,
            c => c,
        }
    }
}

/// Where one audio frame goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AudioPlacement {
    pub group: u64,
    pub object: u64,
    pub starts_group: bool,
    /// Position of the frame in the track, counted from the origin.
    pub sequence: u64,
}

/// Groups audio frames on the sender: a new group once the open one spans `group_us` of
/// media, so a group is a short run of frames on one stream (0: a group per frame).
#[derive(Debug, Clone)]
pub struct AudioMapper {
    group_us: u64,
    origin: u64,
    group: Option<u64>,
    group_start: i64,
    next_object: u64,
    next_sequence: u64,
}

impl AudioMapper {
    /// Group IDs and sequence numbers start at `origin`, as video's do (see
    /// [`Mapper::starting_at`](crate::Mapper::starting_at)).
    pub fn new(group_us: u64, origin: u64) -> AudioMapper {
        AudioMapper {
            group_us,
            origin,
            group: None,
            group_start: 0,
            next_object: 0,
            next_sequence: origin,
        }
    }

    /// Places the next frame, which starts at `pts` (µs).
    pub fn place(&mut self, pts: i64) -> AudioPlacement {
        let span = pts.saturating_sub(self.group_start).unsigned_abs();
        let new_group = match self.group {
            None => true,
            Some(_) => span >= self.group_us || pts < self.group_start,
        };
        if new_group {
            self.group = Some(self.group.map_or(self.origin, |g| g + 1));
            self.group_start = pts;
            self.next_object = 0;
        }
        let placement = AudioPlacement {
            group: self.group.unwrap_or(self.origin),
            object: self.next_object,
            starts_group: new_group,
            sequence: self.next_sequence,
        };
        self.next_object += 1;
        self.next_sequence += 1;
        placement
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opus_heads_round_trip_and_bad_ones_are_refused() {
        let stereo = OpusHead::simple(2, 48_000);
        let bytes = stereo.to_bytes();
        assert_eq!(bytes.len(), 19);
        assert_eq!(OpusHead::parse(&bytes).unwrap(), stereo);
        let surround = OpusHead {
            channels: 6,
            pre_skip: 312,
            input_rate: 44_100,
            output_gain: -256,
            mapping_family: 1,
            stream_count: 4,
            coupled_count: 2,
            mapping: vec![0, 4, 1, 2, 3, 5],
        };
        assert_eq!(OpusHead::parse(&surround.to_bytes()).unwrap(), surround);
        assert!(OpusHead::parse(b"OpusTags\x01\x02\0\0\0\0\0\0\0\0\0").is_err());
        assert!(OpusHead::parse(&bytes[..18]).is_err());
        let mut zero = bytes.clone();
        zero[9] = 0;
        assert!(OpusHead::parse(&zero).is_err());
        let mut family0_surround = bytes.clone();
        family0_surround[9] = 6;
        assert!(OpusHead::parse(&family0_surround).is_err());
        let mut bad_map = surround.clone();
        bad_map.mapping[0] = 9;
        assert!(OpusHead::parse(&bad_map.to_bytes()).is_err());
        let surround_bytes = surround.to_bytes();
        assert!(OpusHead::parse(&surround_bytes[..surround_bytes.len() - 1]).is_err());
    }

    #[test]
    fn aac_configs_give_rate_channels_and_codec_string() {
        // AAC-LC, 48 kHz (index 3), stereo: 00010 0011 0010 000
        let lc = AacConfig::parse(&[0x11, 0x90]).unwrap();
        assert_eq!(
            lc,
            AacConfig {
                object_type: 2,
                sample_rate: 48_000,
                channels: 2
            }
        );
        assert_eq!(lc.codec_string(), "mp4a.40.2");
        // HE-AAC written with an escape: object type 31 + 6 bits, explicit 24-bit rate.
        // 11111 000001 1111 (24 bits 0x00ac44 = 44100) 0001
        let bits: u64 =
            (0b11111 << 59) | (0b000001 << 53) | (0b1111 << 49) | (0x00ac44 << 25) | (0b0001 << 21);
        let escaped = AacConfig::parse(&bits.to_be_bytes()[..6]).unwrap();
        assert_eq!(
            (escaped.object_type, escaped.sample_rate, escaped.channels),
            (33, 44_100, 1)
        );
        assert_eq!(AacConfig { channels: 7, ..lc }.channel_count(), 8);
        assert!(AacConfig::parse(&[]).is_err());
        assert!(AacConfig::parse(&[0x11]).is_err());
        assert!(AacConfig::parse(&[0x00, 0x00]).is_err());
        // Index 13 is reserved.
        assert!(AacConfig::parse(&[0x16, 0x90]).is_err());
    }

    #[test]
    fn frames_join_a_group_until_it_spans_the_group_length() {
        let mut m = AudioMapper::new(100_000, 500);
        let places: Vec<_> = (0..12)
            .map(|i| {
                let p = m.place(i * 20_000);
                (p.group, p.object, p.starts_group, p.sequence)
            })
            .collect();
        assert_eq!(places[0], (500, 0, true, 500));
        assert_eq!(places[4], (500, 4, false, 504));
        assert_eq!(places[5], (501, 0, true, 505));
        assert_eq!(places[10], (502, 0, true, 510));
        // A group per frame, and a step back in time opens a group.
        let mut single = AudioMapper::new(0, 0);
        assert!(single.place(0).starts_group);
        assert!(single.place(20_000).starts_group);
        let mut m = AudioMapper::new(100_000, 0);
        m.place(1_000_000);
        assert!(m.place(0).starts_group);
    }
}
