use thiserror::Error;

/// Everything that can be wrong with an access unit, a parameter set or an avcC record.
///
/// Byte offsets are relative to the start of the buffer that was handed in, so a log line is
/// enough to find the problem in a capture.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum H264Error {
    #[error("access unit is empty")]
    EmptyAccessUnit,
    #[error("byte-stream access unit does not start with a start code")]
    MissingStartCode,
    #[error("empty NAL unit at byte {offset}")]
    EmptyNal { offset: usize },
    #[error("NAL unit at byte {offset} has forbidden_zero_bit set")]
    ForbiddenBit { offset: usize },
    #[error("NAL length prefix at byte {offset} is cut off")]
    TruncatedLengthPrefix { offset: usize },
    #[error("NAL unit at byte {offset} claims {len} bytes but only {available} remain")]
    NalOverrun {
        offset: usize,
        len: usize,
        available: usize,
    },
    #[error("NAL length size {0} is not 1, 2 or 4")]
    InvalidLengthSize(u8),
    #[error("NAL unit of {len} bytes does not fit a {length_size}-byte length prefix")]
    NalTooLong { len: usize, length_size: u8 },
    #[error("access unit contains no slice NAL unit")]
    NoSlice,
    #[error("expected NAL unit type {expected}, found {found}")]
    UnexpectedNalType { expected: u8, found: u8 },
    #[error("bitstream ends inside {0}")]
    EndOfData(&'static str),
    #[error("exp-Golomb code for {0} has more than 31 leading zero bits")]
    ExpGolombOverflow(&'static str),
    #[error("{field} = {value} is out of range")]
    OutOfRange { field: &'static str, value: u64 },
    #[error("invalid avcC: {0}")]
    InvalidAvcc(&'static str),
    #[error("{0} does not end with rbsp_trailing_bits")]
    TrailingBits(&'static str),
    #[error("slice refers to PPS {0}, which is not known")]
    UnknownPps(u8),
    #[error("PPS {pps_id} refers to SPS {sps_id}, which is not known")]
    UnknownSps { pps_id: u8, sps_id: u8 },
    /// Fields that are each in range but contradict each other or the stream so far.
    #[error("{0}")]
    Inconsistent(&'static str),
}

impl H264Error {
    /// The bytes may be fine but refer to a parameter set not seen yet: the usual state of
    /// a stream joined mid-way, before its first keyframe with SPS/PPS.
    pub fn is_missing_parameter_set(&self) -> bool {
        matches!(
            self,
            H264Error::UnknownPps(_) | H264Error::UnknownSps { .. }
        )
    }
}
