//! Stateful parsing of a published stream: validated parameter sets and the active ones.
//!
//! A publisher hands every access unit to one [`StreamParser`]. What it emits for late
//! joiners (the catalog's avcC, the SPS/PPS put in front of keyframes) must be exactly what
//! the stream uses: a cache of everything ever seen lets one bogus set, accepted once, break
//! every later joiner while viewers already playing see nothing wrong. So sets are validated
//! before they are stored, slices are validated against them, and only the sets the current
//! pictures refer to are emitted.
//!
//! An access unit is taken or refused as a whole: a refused one changes no state.

use std::sync::Arc;

use crate::H264Error;
use crate::classify::{AuInfo, FrameKind};
use crate::nal::{Nal, START_CODE, StreamFormat, nal_type, nal_units};
use crate::params::{AvccRecord, write_avcc};
use crate::pps::{Pps, pps_ids};
use crate::slice::{SliceHeader, parse_slice_header};
use crate::sps::{Sps, SpsInfo};

/// Number of possible `pic_parameter_set_id` values.
const PPS_IDS: usize = 256;

#[derive(Debug, PartialEq, Eq)]
struct SpsEntry {
    nal: Vec<u8>,
    sps: Sps,
}

#[derive(Debug, PartialEq, Eq)]
struct PpsEntry {
    nal: Vec<u8>,
    pps: Pps,
}

/// Entries keyed by id, sorted: streams use one or a few ids, so this stays tiny and cheap
/// to clone, and the id range bounds it anyway.
#[derive(Debug)]
struct IdMap<T>(Vec<(u8, Arc<T>)>);

impl<T> Clone for IdMap<T> {
    fn clone(&self) -> Self {
        IdMap(self.0.clone())
    }
}

impl<T> Default for IdMap<T> {
    fn default() -> Self {
        IdMap(Vec::new())
    }
}

impl<T> IdMap<T> {
    fn get(&self, id: u8) -> Option<&Arc<T>> {
        self.0
            .binary_search_by_key(&id, |(k, _)| *k)
            .ok()
            .map(|i| &self.0[i].1)
    }

    fn set(&mut self, id: u8, value: Arc<T>) {
        match self.0.binary_search_by_key(&id, |(k, _)| *k) {
            Ok(i) => self.0[i].1 = value,
            Err(i) => self.0.insert(i, (id, value)),
        }
    }
}

/// Validated candidate sets, one per id: at most 32 SPS and 256 PPS of at most 64 KiB each.
/// Entries are shared with [`ActiveSets`].
#[derive(Debug, Clone, Default)]
struct Store {
    sps: IdMap<SpsEntry>,
    pps: IdMap<PpsEntry>,
}

/// avcC stores parameter-set lengths in 16 bits.
fn check_length(nal: &[u8]) -> Result<(), H264Error> {
    if nal.len() > usize::from(u16::MAX) {
        return Err(H264Error::OutOfRange {
            field: "parameter set length",
            value: nal.len() as u64,
        });
    }
    Ok(())
}

impl Store {
    /// Validates and stores an SPS; returns its id. PPSs naming it are parsed again against
    /// the new content, and dropped if they no longer fit it.
    fn insert_sps(&mut self, nal: &[u8]) -> Result<u8, H264Error> {
        check_length(nal)?;
        let sps = Sps::parse(nal)?;
        let id = sps.sps_id();
        if self.sps.get(id).is_some_and(|old| old.nal == nal) {
            return Ok(id);
        }
        self.pps.0.retain_mut(|(_, entry)| {
            if entry.pps.sps_id() != id {
                return true;
            }
            match Pps::parse(&entry.nal, &sps) {
                Ok(pps) => {
                    *entry = Arc::new(PpsEntry {
                        nal: entry.nal.clone(),
                        pps,
                    });
                    true
                }
                Err(_) => false,
            }
        });
        self.sps.set(
            id,
            Arc::new(SpsEntry {
                nal: nal.to_vec(),
                sps,
            }),
        );
        Ok(id)
    }

    /// Validates a PPS against the stored SPS it names and stores it.
    fn insert_pps(&mut self, nal: &Nal<'_>) -> Result<(), H264Error> {
        check_length(nal.data)?;
        let (pps_id, sps_id) = pps_ids(nal)?;
        let sps = self
            .sps
            .get(sps_id)
            .ok_or(H264Error::UnknownSps { pps_id, sps_id })?;
        if self.pps.get(pps_id).is_some_and(|old| old.nal == nal.data) {
            return Ok(());
        }
        let pps = Pps::parse(nal.data, &sps.sps)?;
        self.pps.set(
            pps_id,
            Arc::new(PpsEntry {
                nal: nal.data.to_vec(),
                pps,
            }),
        );
        Ok(())
    }

    fn lookup(&self, pps_id: u8) -> Result<(&Pps, &Sps), H264Error> {
        let pps = self.pps.get(pps_id).ok_or(H264Error::UnknownPps(pps_id))?;
        let sps_id = pps.pps.sps_id();
        let sps = self
            .sps
            .get(sps_id)
            .ok_or(H264Error::UnknownSps { pps_id, sps_id })?;
        Ok((&pps.pps, &sps.sps))
    }
}

/// A set of PPS ids, one bit each.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct PpsIds([u64; PPS_IDS / 64]);

impl PpsIds {
    fn insert(&mut self, id: u8) {
        self.0[usize::from(id / 64)] |= 1 << (id % 64);
    }

    fn union(self, other: PpsIds) -> PpsIds {
        let mut out = self;
        for (a, b) in out.0.iter_mut().zip(other.0) {
            *a |= b;
        }
        out
    }

    fn iter(self) -> impl Iterator<Item = u8> {
        (0..=u8::MAX).filter(move |&id| self.0[usize::from(id / 64)] & (1 << (id % 64)) != 0)
    }
}

/// The SPS and PPSs the stream currently uses, and the two forms a joiner receives them in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveSets {
    sps: Arc<SpsEntry>,
    /// Sorted by id.
    pps: Vec<Arc<PpsEntry>>,
    avcc: Vec<u8>,
    annexb: Vec<u8>,
}

impl ActiveSets {
    fn new(sps: Arc<SpsEntry>, pps: Vec<Arc<PpsEntry>>) -> Self {
        let sps_nals = [&sps.nal[..]];
        let pps_nals: Vec<&[u8]> = pps.iter().map(|p| &p.nal[..]).collect();
        let avcc = write_avcc(&sps.sps.info(), &sps_nals, &pps_nals);
        let mut annexb = Vec::new();
        for nal in sps_nals.into_iter().chain(pps_nals) {
            annexb.extend_from_slice(&START_CODE);
            annexb.extend_from_slice(nal);
        }
        ActiveSets {
            sps,
            pps,
            avcc,
            annexb,
        }
    }

    pub fn sps_id(&self) -> u8 {
        self.sps.sps.sps_id()
    }

    /// Ids of the active PPSs, ascending.
    pub fn pps_ids(&self) -> impl Iterator<Item = u8> + '_ {
        self.pps.iter().map(|p| p.pps.pps_id())
    }

    pub fn sps(&self) -> &Sps {
        &self.sps.sps
    }

    /// Profile, level and picture size of the active SPS, for the catalog.
    pub fn sps_info(&self) -> SpsInfo {
        self.sps.sps.info()
    }

    /// AVCDecoderConfigurationRecord (4-byte NAL lengths) with the active SPS and PPSs only.
    pub fn avcc(&self) -> &[u8] {
        &self.avcc
    }

    /// The active SPS then PPSs, each behind a four-byte start code: what a byte-stream
    /// decoder needs in front of a keyframe that carries no sets of its own.
    pub fn annexb_prefix(&self) -> &[u8] {
        &self.annexb
    }

    /// The active SPS and PPS NAL units, SPS first.
    pub fn nal_units(&self) -> impl Iterator<Item = &[u8]> + '_ {
        std::iter::once(&self.sps.nal[..]).chain(self.pps.iter().map(|p| &p.nal[..]))
    }
}

/// What [`StreamParser::push`] learned about one access unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedAu {
    /// The same as [`classify`](crate::classify) reports for this access unit.
    pub info: AuInfo,
    /// pic_parameter_set_id of the primary picture's slices, and the SPS that PPS names.
    pub pps_id: u8,
    pub sps_id: u8,
    /// Keyframes only: the active sets differ from those at the previous keyframe (always
    /// true at the first). Whoever publishes the sets out of band publishes them again.
    pub active_changed: bool,
    /// The access unit itself carries the active SPS and every active PPS, byte for byte,
    /// so a keyframe needs no [`ActiveSets::annexb_prefix`] in front of it.
    pub carries_active_sets: bool,
}

/// Validates a stream access unit by access unit and tracks the parameter sets it uses.
///
/// - In-band SPS/PPS (and those of `codec_data`, [`load_avcc`](Self::load_avcc)) are
///   validated ([`Sps::parse`], [`Pps::parse`]) before they are stored as candidates, one per
///   id; an invalid one makes its access unit malformed and is not stored.
/// - Every slice header is read in full against the candidate it names; the slices must form
///   one primary picture.
/// - The *active* sets are the SPS of the most recent keyframe and the PPSs its pictures
///   refer to: those of the keyframe, plus PPSs that later pictures of the same sequence
///   used (taken in at the next keyframe, so what a joiner gets only changes at keyframes).
///   A keyframe naming another SPS, or one whose SPS content was replaced, starts afresh.
///   Candidates nothing refers to are never emitted.
#[derive(Debug, Clone, Default)]
pub struct StreamParser {
    store: Store,
    active: Option<ActiveSets>,
    /// PPSs non-key pictures referred to since the last keyframe.
    used_since_keyframe: PpsIds,
}

impl StreamParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Loads the SPS/PPS of an avcC record (caps `codec_data`) as candidates, validated like
    /// in-band ones; returns the NAL length size the stream uses. All or nothing: on error no
    /// set of the record is stored. The active sets change only at the next keyframe.
    pub fn load_avcc(&mut self, record: &[u8]) -> Result<u8, H264Error> {
        let record = AvccRecord::parse(record)?;
        let mut store = self.store.clone();
        for nal in &record.sps {
            store.insert_sps(nal)?;
        }
        for nal in &record.pps {
            store.insert_pps(&Nal::parse(nal)?)?;
        }
        self.store = store;
        Ok(record.length_size)
    }

    /// Validates one access unit, stores its parameter sets and updates the active sets.
    ///
    /// Fails, changing nothing, when the framing is broken, a parameter set is invalid, a
    /// slice names an unknown PPS ([`H264Error::is_missing_parameter_set`]: normal before the
    /// first keyframe with sets), a slice header is invalid for its sets, the slices are not
    /// one picture, or a non-IDR access unit tries to change the sequence's SPS.
    pub fn push(&mut self, au: &[u8], format: StreamFormat) -> Result<ParsedAu, H264Error> {
        let (mut sps_nals, mut pps_nals, mut slices) = (Vec::new(), Vec::new(), Vec::new());
        for nal in nal_units(au, format) {
            let nal = nal?;
            match nal.nal_type {
                nal_type::SPS => sps_nals.push(nal),
                nal_type::PPS => pps_nals.push(nal),
                nal_type::SLICE | nal_type::SLICE_PARTITION_A | nal_type::IDR => slices.push(nal),
                _ => {}
            }
        }
        let first = *slices.first().ok_or(H264Error::NoSlice)?;
        let idr = first.nal_type == nal_type::IDR;

        // Sets first, all SPS before any PPS, so their order inside the unit does not matter.
        let staged = if sps_nals.is_empty() && pps_nals.is_empty() {
            None
        } else {
            let mut store = self.store.clone();
            for nal in &sps_nals {
                let id = store.insert_sps(nal.data)?;
                if !idr
                    && let Some(active) = &self.active
                    && active.sps_id() == id
                    && active.sps.nal != nal.data
                {
                    return Err(H264Error::Inconsistent(
                        "the active SPS changes in an access unit that is not IDR",
                    ));
                }
            }
            for nal in &pps_nals {
                store.insert_pps(nal)?;
            }
            Some(store)
        };
        let store = staged.as_ref().unwrap_or(&self.store);

        let picture = check_slices(&slices, store)?;
        let primary = picture.primary;
        if !idr
            && let Some(active) = &self.active
            && primary.sps_id != active.sps_id()
        {
            return Err(H264Error::Inconsistent(
                "a non-IDR picture refers to another SPS than its sequence",
            ));
        }

        let mut next_active = None;
        if idr {
            let sps = store
                .sps
                .get(primary.sps_id)
                .cloned()
                .ok_or(H264Error::UnknownSps {
                    pps_id: primary.pps_id,
                    sps_id: primary.sps_id,
                })?;
            let mut ids = picture.pps_ids;
            // Same sequence parameters: keep the PPSs its pictures used so far.
            if let Some(active) = &self.active
                && active.sps.nal == sps.nal
            {
                ids = active
                    .pps_ids()
                    .fold(ids, |mut ids, id| {
                        ids.insert(id);
                        ids
                    })
                    .union(self.used_since_keyframe);
            }
            let pps = ids
                .iter()
                .filter_map(|id| store.pps.get(id).cloned())
                .filter(|p| p.pps.sps_id() == primary.sps_id)
                .collect();
            next_active = Some(ActiveSets::new(sps, pps));
        }

        // Nothing below can fail: commit.
        if let Some(store) = staged {
            self.store = store;
        }
        let mut active_changed = false;
        if let Some(next) = next_active {
            active_changed = self.active.as_ref().is_none_or(|a| a.annexb != next.annexb);
            if active_changed {
                self.active = Some(next);
            }
            self.used_since_keyframe = PpsIds::default();
        } else {
            self.used_since_keyframe = self.used_since_keyframe.union(picture.pps_ids);
        }
        let carries_active_sets = self.active.as_ref().is_some_and(|active| {
            active
                .nal_units()
                .all(|set| sps_nals.iter().chain(&pps_nals).any(|n| n.data == set))
        });

        let kind = if idr {
            FrameKind::Key
        } else if first.ref_idc != 0 {
            FrameKind::Reference
        } else {
            FrameKind::NonReference
        };
        Ok(ParsedAu {
            info: AuInfo {
                kind,
                slice_type: picture.first_slice_type,
                ref_idc: first.ref_idc,
                has_sps: !sps_nals.is_empty(),
                has_pps: !pps_nals.is_empty(),
            },
            pps_id: primary.pps_id,
            sps_id: primary.sps_id,
            active_changed,
            carries_active_sets,
        })
    }

    /// The sets the stream uses now; `None` until the first keyframe.
    pub fn active(&self) -> Option<&ActiveSets> {
        self.active.as_ref()
    }

    /// [`ActiveSets::sps_info`] of the active sets.
    pub fn sps_info(&self) -> Option<SpsInfo> {
        self.active.as_ref().map(ActiveSets::sps_info)
    }
}

/// What the slices of one access unit agree on.
struct Picture {
    /// Header of the first slice of the primary coded picture.
    primary: SliceHeader,
    first_slice_type: crate::SliceType,
    /// Every PPS a slice of the unit (redundant ones included) refers to.
    pps_ids: PpsIds,
}

/// Parses every slice header and checks the slices form one primary coded picture (plus any
/// redundant slices): same IDR-ness, reference-ness and picture-identifying fields, no two
/// slices starting at the same macroblock, one slice type if any slice promised so.
fn check_slices(slices: &[Nal<'_>], store: &Store) -> Result<Picture, H264Error> {
    let first = slices[0];
    let mut primary: Option<SliceHeader> = None;
    let mut first_slice_type = None;
    let mut pps_ids = PpsIds::default();
    let mut starts = Vec::with_capacity(slices.len());
    let (mut mixed_types, mut single_type_promised) = (false, false);
    for nal in slices {
        if (nal.nal_type == nal_type::IDR) != (first.nal_type == nal_type::IDR) {
            return Err(H264Error::Inconsistent(
                "IDR and non-IDR slices in one access unit",
            ));
        }
        if (nal.ref_idc == 0) != (first.ref_idc == 0) {
            return Err(H264Error::Inconsistent(
                "slices of one picture disagree on nal_ref_idc",
            ));
        }
        if nal.nal_type == nal_type::IDR && nal.ref_idc == 0 {
            return Err(H264Error::OutOfRange {
                field: "nal_ref_idc of an IDR slice",
                value: 0,
            });
        }
        let header = parse_slice_header(nal, |id| store.lookup(id))?;
        first_slice_type.get_or_insert(header.slice_type);
        pps_ids.insert(header.pps_id);
        // A redundant coded picture repeats parts of the primary one; its header being valid
        // is all that is asked of it.
        if header.redundant_pic_cnt > 0 {
            continue;
        }
        match &primary {
            None => primary = Some(header),
            Some(p) => {
                if !p.same_picture(&header) {
                    return Err(H264Error::Inconsistent(
                        "slices of one access unit belong to different pictures",
                    ));
                }
                mixed_types |= p.slice_type != header.slice_type;
            }
        }
        single_type_promised |= header.slice_type_code >= 5;
        starts.push((header.colour_plane_id, header.first_mb));
    }
    if mixed_types && single_type_promised {
        return Err(H264Error::Inconsistent(
            "slice types differ in a picture whose slice_type promised one",
        ));
    }
    starts.sort_unstable();
    if starts.windows(2).any(|w| w[0] == w[1]) {
        return Err(H264Error::Inconsistent(
            "two slices of one picture start at the same macroblock",
        ));
    }
    let primary = primary.ok_or(H264Error::Inconsistent(
        "access unit holds no primary coded picture",
    ))?;
    Ok(Picture {
        primary,
        first_slice_type: first_slice_type.unwrap_or(primary.slice_type),
        pps_ids,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify;
    use crate::params::write_avcc;
    use crate::testutil::{PpsSpec, SliceSpec, SpsSpec, annex_b, length_prefixed};

    const BS: StreamFormat = StreamFormat::ByteStream;

    /// The SPS of the issue: valid framing, level_idc 80, sps_id 1.
    const BOGUS_SPS: [u8; 12] = [
        0x67, 0x42, 0x12, 0x50, 0x42, 0x7f, 0x36, 0xef, 0xd0, 0x62, 0x72, 0x40,
    ];

    fn sps(id: u32) -> Vec<u8> {
        SpsSpec {
            sps_id: id,
            ..SpsSpec::hd()
        }
        .nal()
    }

    fn pps(pps_id: u32, sps_id: u32) -> Vec<u8> {
        PpsSpec {
            pps_id,
            sps_id,
            ..PpsSpec::default()
        }
        .nal()
    }

    fn idr_with(pps_id: u32) -> Vec<u8> {
        SliceSpec {
            pps_id,
            ..SliceSpec::idr()
        }
        .nal()
    }

    /// Pushes an access unit that must be accepted, checking it classifies the same way.
    fn push_ok(parser: &mut StreamParser, au: &[u8], format: StreamFormat) -> ParsedAu {
        let parsed = parser
            .push(au, format)
            .unwrap_or_else(|e| panic!("refused: {e}"));
        assert_eq!(parsed.info, classify(au, format).unwrap());
        parsed
    }

    /// A parser that took one 1080p keyframe with SPS 0 and PPS 0 in-band.
    fn started() -> (StreamParser, Vec<u8>) {
        let mut parser = StreamParser::new();
        let au = annex_b(&[&sps(0), &pps(0, 0), &idr_with(0)]);
        push_ok(&mut parser, &au, BS);
        (parser, annex_b(&[&sps(0), &pps(0, 0)]))
    }

    #[test]
    fn keyframe_activates_its_sets() {
        let mut parser = StreamParser::new();
        assert!(parser.active().is_none());
        let au = annex_b(&[&[0x09, 0x10], &sps(0), &pps(0, 0), &idr_with(0)]);
        let parsed = push_ok(&mut parser, &au, BS);
        assert_eq!((parsed.sps_id, parsed.pps_id), (0, 0));
        assert!(parsed.active_changed && parsed.carries_active_sets);
        assert_eq!(parsed.info.kind, FrameKind::Key);

        let active = parser.active().unwrap();
        assert_eq!(active.sps_id(), 0);
        assert_eq!(active.pps_ids().collect::<Vec<_>>(), [0]);
        assert_eq!(active.annexb_prefix(), annex_b(&[&sps(0), &pps(0, 0)]));
        let info = active.sps_info();
        assert_eq!((info.width, info.height), (1920, 1080));
        assert_eq!(parser.sps_info(), Some(info));
        assert_eq!(active.avcc(), write_avcc(&info, &[&sps(0)], &[&pps(0, 0)]));

        // Later pictures, and a keyframe without sets: nothing changes.
        let p = push_ok(&mut parser, &annex_b(&[&SliceSpec::p(1).nal()]), BS);
        assert_eq!(p.info.kind, FrameKind::Reference);
        assert!(!p.active_changed && !p.carries_active_sets);
        let b = push_ok(&mut parser, &annex_b(&[&SliceSpec::b(2).nal()]), BS);
        assert_eq!(b.info.kind, FrameKind::NonReference);
        let again = push_ok(&mut parser, &annex_b(&[&idr_with(0)]), BS);
        assert!(!again.active_changed && !again.carries_active_sets);
        assert_eq!(
            parser.active().unwrap().annexb_prefix(),
            annex_b(&[&sps(0), &pps(0, 0)])
        );
    }

    #[test]
    fn bogus_sps_is_rejected_and_changes_nothing() {
        let (mut parser, prefix) = started();
        let avcc = parser.active().unwrap().avcc().to_vec();
        // In a keyframe, in front of the real sets (as it was found), and after them.
        for au in [
            annex_b(&[&BOGUS_SPS, &sps(0), &pps(0, 0), &idr_with(0)]),
            annex_b(&[&sps(0), &pps(0, 0), &BOGUS_SPS, &idr_with(0)]),
            annex_b(&[&BOGUS_SPS, &SliceSpec::p(1).nal()]),
        ] {
            assert_eq!(
                parser.push(&au, BS),
                Err(H264Error::OutOfRange {
                    field: "level_idc",
                    value: 80
                })
            );
        }
        // Nothing of it was stored: a PPS naming SPS 1 has no SPS.
        let pps1 = pps(1, 1);
        assert_eq!(
            parser.push(&annex_b(&[&pps1, &idr_with(1)]), BS),
            Err(H264Error::UnknownSps {
                pps_id: 1,
                sps_id: 1
            })
        );
        let key = push_ok(&mut parser, &annex_b(&[&idr_with(0)]), BS);
        assert!(!key.active_changed);
        let active = parser.active().unwrap();
        assert_eq!(active.avcc(), avcc);
        assert_eq!(active.annexb_prefix(), prefix);

        // Not from codec_data either.
        let mut record = avcc.clone();
        record[5] = 0xe2;
        record.splice(8 + sps(0).len()..8 + sps(0).len(), {
            let mut entry = (BOGUS_SPS.len() as u16).to_be_bytes().to_vec();
            entry.extend_from_slice(&BOGUS_SPS);
            entry
        });
        assert!(crate::ParameterSets::from_avcc(&record).is_ok());
        assert!(parser.load_avcc(&record).is_err());
        assert_eq!(parser.active().unwrap().avcc(), avcc);
    }

    #[test]
    fn unreferenced_sets_are_not_emitted() {
        let mut parser = StreamParser::new();
        let (sps1, pps1, pps2) = (sps(1), pps(1, 1), pps(2, 0));
        let au = annex_b(&[&sps(0), &sps1, &pps(0, 0), &pps1, &pps2, &idr_with(0)]);
        let parsed = push_ok(&mut parser, &au, BS);
        assert!(parsed.carries_active_sets);
        let active = parser.active().unwrap();
        assert_eq!(active.annexb_prefix(), annex_b(&[&sps(0), &pps(0, 0)]));
        let info = active.sps_info();
        assert_eq!(active.avcc(), write_avcc(&info, &[&sps(0)], &[&pps(0, 0)]));
        // They stay candidates: a later keyframe may name them.
        let parsed = push_ok(&mut parser, &annex_b(&[&idr_with(1)]), BS);
        assert!(parsed.active_changed);
        assert_eq!((parsed.sps_id, parsed.pps_id), (1, 1));
        assert_eq!(
            parser.active().unwrap().annexb_prefix(),
            annex_b(&[&sps1, &pps1])
        );
    }

    #[test]
    fn resolution_change_replaces_the_active_sets() {
        let (mut parser, _) = started();
        let hd720 = SpsSpec {
            width_mbs: 80,
            height_map_units: 45,
            crop: None,
            ..SpsSpec::hd()
        }
        .nal();
        // Within a sequence the SPS may not change.
        let p = annex_b(&[&hd720, &SliceSpec::p(1).nal()]);
        assert!(matches!(
            parser.push(&p, BS),
            Err(H264Error::Inconsistent(_))
        ));
        assert_eq!(parser.sps_info().unwrap().height, 1080);

        let key = annex_b(&[&hd720, &pps(0, 0), &idr_with(0)]);
        let parsed = push_ok(&mut parser, &key, BS);
        assert!(parsed.active_changed && parsed.carries_active_sets);
        let active = parser.active().unwrap();
        assert_eq!(
            (active.sps_info().width, active.sps_info().height),
            (1280, 720)
        );
        assert_eq!(active.annexb_prefix(), annex_b(&[&hd720, &pps(0, 0)]));
        // first_mb_in_slice is now checked against the smaller picture.
        let beyond = SliceSpec {
            first_mb: 80 * 45,
            ..SliceSpec::p(1)
        };
        assert!(matches!(
            parser.push(&annex_b(&[&beyond.nal()]), BS),
            Err(H264Error::OutOfRange {
                field: "first_mb_in_slice",
                ..
            })
        ));
        push_ok(&mut parser, &annex_b(&[&SliceSpec::p(1).nal()]), BS);
    }

    #[test]
    fn pps_used_later_in_the_sequence_joins_at_the_next_keyframe() {
        let (mut parser, prefix) = started();
        let pps1 = PpsSpec {
            pps_id: 1,
            chroma_qp_index_offset: 2,
            ..PpsSpec::default()
        }
        .nal();
        let p = SliceSpec {
            pps_id: 1,
            ..SliceSpec::p(1)
        };
        let parsed = push_ok(&mut parser, &annex_b(&[&pps1, &p.nal()]), BS);
        assert_eq!(parsed.pps_id, 1);
        assert!(!parsed.active_changed);
        assert_eq!(parser.active().unwrap().annexb_prefix(), prefix);

        let key = push_ok(&mut parser, &annex_b(&[&idr_with(0)]), BS);
        assert!(key.active_changed);
        let active = parser.active().unwrap();
        assert_eq!(active.pps_ids().collect::<Vec<_>>(), [0, 1]);
        assert_eq!(
            active.annexb_prefix(),
            annex_b(&[&sps(0), &pps(0, 0), &pps1])
        );
        // A PPS replaced in-band is emitted with its new content from the next keyframe.
        let pps0_new = PpsSpec {
            chroma_qp_index_offset: -3,
            ..PpsSpec::default()
        }
        .nal();
        push_ok(
            &mut parser,
            &annex_b(&[&pps0_new, &SliceSpec::p(1).nal()]),
            BS,
        );
        assert_eq!(parser.active().unwrap().pps[0].nal, pps(0, 0));
        let key = push_ok(&mut parser, &annex_b(&[&idr_with(0)]), BS);
        assert!(key.active_changed);
        assert_eq!(
            parser.active().unwrap().annexb_prefix(),
            annex_b(&[&sps(0), &pps0_new, &pps1])
        );
        // A new SPS starts afresh with only what its keyframe uses.
        let key = annex_b(&[&sps(1), &pps(5, 1), &idr_with(5)]);
        push_ok(&mut parser, &key, BS);
        assert_eq!(
            parser.active().unwrap().annexb_prefix(),
            annex_b(&[&sps(1), &pps(5, 1)])
        );
    }

    #[test]
    fn codec_data_sets_are_candidates() {
        let record = write_avcc(
            &crate::parse_sps(&sps(0)).unwrap(),
            &[&sps(0), &sps(1)],
            &[&pps(0, 0), &pps(1, 1)],
        );
        let mut parser = StreamParser::new();
        assert_eq!(parser.load_avcc(&record), Ok(4));
        assert!(parser.active().is_none());
        let avc = StreamFormat::Avc { length_size: 4 };
        let parsed = push_ok(&mut parser, &length_prefixed(&[&idr_with(1)], 4), avc);
        assert!(parsed.active_changed && !parsed.carries_active_sets);
        let active = parser.active().unwrap();
        assert_eq!(active.annexb_prefix(), annex_b(&[&sps(1), &pps(1, 1)]));
        assert_eq!(
            active.avcc(),
            write_avcc(&active.sps_info(), &[&sps(1)], &[&pps(1, 1)])
        );
        // A record with one bad set loads nothing.
        let bad = write_avcc(
            &crate::parse_sps(&sps(0)).unwrap(),
            &[&sps(2)],
            &[&pps(2, 2), &pps(3, 4)],
        );
        assert_eq!(
            parser.load_avcc(&bad),
            Err(H264Error::UnknownSps {
                pps_id: 3,
                sps_id: 4
            })
        );
        assert_eq!(
            parser.push(&length_prefixed(&[&idr_with(2)], 4), avc),
            Err(H264Error::UnknownPps(2))
        );
    }

    #[test]
    fn missing_sets_before_the_first_keyframe() {
        let mut parser = StreamParser::new();
        for au in [annex_b(&[&SliceSpec::p(1).nal()]), annex_b(&[&idr_with(0)])] {
            let err = parser.push(&au, BS).unwrap_err();
            assert_eq!(err, H264Error::UnknownPps(0));
            assert!(err.is_missing_parameter_set());
        }
        let err = parser
            .push(&annex_b(&[&pps(0, 0), &idr_with(0)]), BS)
            .unwrap_err();
        assert!(err.is_missing_parameter_set());
        assert!(!H264Error::NoSlice.is_missing_parameter_set());
        assert!(parser.active().is_none());
    }

    #[test]
    fn malformed_pictures() {
        let (mut parser, prefix) = started();
        let refused = |parser: &mut StreamParser, nals: &[&[u8]]| {
            parser.push(&annex_b(nals), BS).unwrap_err()
        };
        let idr = |spec: SliceSpec| spec.nal();
        let field = |e: H264Error| match e {
            H264Error::OutOfRange { field, .. } => field,
            other => panic!("{other:?}"),
        };
        let p_in_idr = idr(SliceSpec {
            slice_type: 5,
            ..SliceSpec::idr()
        });
        assert_eq!(
            field(refused(&mut parser, &[&p_in_idr])),
            "slice_type of an IDR picture"
        );
        let frame_num = idr(SliceSpec {
            frame_num: 3,
            ..SliceSpec::idr()
        });
        assert_eq!(
            field(refused(&mut parser, &[&frame_num])),
            "frame_num of an IDR picture"
        );
        let beyond = idr(SliceSpec {
            first_mb: 120 * 68,
            ..SliceSpec::idr()
        });
        assert_eq!(field(refused(&mut parser, &[&beyond])), "first_mb_in_slice");
        let qp = idr(SliceSpec {
            qp_delta: 26,
            ..SliceSpec::idr()
        });
        assert_eq!(field(refused(&mut parser, &[&qp])), "slice_qp_delta");
        let unreferenced_idr = idr(SliceSpec {
            ref_idc: 0,
            ..SliceSpec::idr()
        });
        assert_eq!(
            field(refused(&mut parser, &[&unreferenced_idr])),
            "nal_ref_idc of an IDR slice"
        );
        assert_eq!(
            refused(&mut parser, &[&idr_with(9)]),
            H264Error::UnknownPps(9)
        );

        let inconsistent = |e: H264Error| assert!(matches!(e, H264Error::Inconsistent(_)), "{e:?}");
        let second = |spec: SliceSpec| {
            SliceSpec {
                first_mb: 4000,
                ..spec
            }
            .nal()
        };
        let first_idr = idr_with(0);
        inconsistent(refused(
            &mut parser,
            &[&first_idr, &second(SliceSpec::p(0))],
        ));
        inconsistent(refused(&mut parser, &[&first_idr, &first_idr]));
        inconsistent(refused(
            &mut parser,
            &[
                &first_idr,
                &second(SliceSpec {
                    idr_pic_id: 1,
                    ..SliceSpec::idr()
                }),
            ],
        ));
        let p1 = SliceSpec::p(1).nal();
        inconsistent(refused(&mut parser, &[&p1, &second(SliceSpec::p(2))]));
        inconsistent(refused(&mut parser, &[&p1, &second(SliceSpec::b(1))]));
        // Slice types may differ within a picture unless a slice_type above 4 promised not.
        let i_slice = |code| {
            second(SliceSpec {
                slice_type: code,
                ..SliceSpec::p(1)
            })
        };
        inconsistent(refused(&mut parser, &[&p1, &i_slice(2)]));
        let p1_plain = SliceSpec {
            slice_type: 0,
            ..SliceSpec::p(1)
        }
        .nal();
        push_ok(&mut parser, &annex_b(&[&p1_plain, &i_slice(2)]), BS);
        // A slice header with no slice data behind it.
        let mut header_only = SliceSpec::idr().nal();
        header_only.truncate(header_only.len() - 2);
        let last = header_only.len() - 1;
        header_only[last] |= 0x01;
        assert!(parser.push(&annex_b(&[&header_only]), BS).is_err());
        // None of it touched the active sets.
        assert_eq!(parser.active().unwrap().annexb_prefix(), prefix);
    }

    #[test]
    fn refused_unit_stores_none_of_its_sets() {
        let (mut parser, prefix) = started();
        let bad_slice = SliceSpec {
            slice_type: 5,
            pps_id: 1,
            ..SliceSpec::idr()
        }
        .nal();
        assert!(
            parser
                .push(&annex_b(&[&sps(1), &pps(1, 1), &bad_slice]), BS)
                .is_err()
        );
        assert_eq!(
            parser.push(&annex_b(&[&idr_with(1)]), BS),
            Err(H264Error::UnknownPps(1))
        );
        assert_eq!(parser.active().unwrap().annexb_prefix(), prefix);
    }

    #[test]
    fn cabac_alignment_is_checked() {
        let mut parser = StreamParser::new();
        let cabac = PpsSpec {
            cabac: true,
            transform_8x8: Some(true),
            ..PpsSpec::default()
        }
        .nal();
        let idr = SliceSpec {
            cabac: true,
            ..SliceSpec::idr()
        };
        push_ok(&mut parser, &annex_b(&[&sps(0), &cabac, &idr.nal()]), BS);
        let p = SliceSpec {
            cabac: true,
            ..SliceSpec::p(1)
        };
        push_ok(&mut parser, &annex_b(&[&p.nal()]), BS);
        // The CAVLC form of the same header lacks the one bits before the data.
        assert!(
            parser
                .push(&annex_b(&[&SliceSpec::p(1).nal()]), BS)
                .is_err()
        );
    }

    #[test]
    fn field_pictures() {
        // 1920x1088 as two 544-line fields: 120 x 34 macroblocks per field.
        let interlaced = SpsSpec {
            frame_mbs_only: false,
            height_map_units: 34,
            crop: None,
            ..SpsSpec::hd()
        }
        .nal();
        let field = |first_mb, field_pic| SliceSpec {
            first_mb,
            field_pic: Some(field_pic),
            ..SliceSpec::idr()
        };
        let mut parser = StreamParser::new();
        let au = annex_b(&[&interlaced, &pps(0, 0), &field(0, true).nal()]);
        push_ok(&mut parser, &au, BS);
        assert_eq!(parser.sps_info().unwrap().height, 1088);
        let last_in_field = field(120 * 34 - 1, true).nal();
        push_ok(&mut parser, &annex_b(&[&last_in_field]), BS);
        // Past the field, though still inside the frame.
        assert!(matches!(
            parser.push(&annex_b(&[&field(120 * 34, true).nal()]), BS),
            Err(H264Error::OutOfRange {
                field: "first_mb_in_slice",
                ..
            })
        ));
        // MBAFF frame (the SPS sets mb_adaptive_frame_field_flag): pairs count once.
        push_ok(
            &mut parser,
            &annex_b(&[&field(120 * 34 - 1, false).nal()]),
            BS,
        );
        assert!(
            parser
                .push(&annex_b(&[&field(120 * 34, false).nal()]), BS)
                .is_err()
        );
        // A frame slice and a field slice are not one picture.
        let mixed = annex_b(&[&field(0, false).nal(), &field(40, true).nal()]);
        assert!(matches!(
            parser.push(&mixed, BS),
            Err(H264Error::Inconsistent(_))
        ));
    }

    /// xorshift64: deterministic noise.
    struct Noise(u64);

    impl Noise {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    /// Share of `payloads` random payloads behind NAL header `header` that `parser` (after
    /// a valid keyframe) accepts as a picture.
    fn acceptance(parser: &StreamParser, header: u8, payloads: usize, seed: u64) -> f64 {
        let mut noise = Noise(seed);
        let avc = StreamFormat::Avc { length_size: 4 };
        let mut accepted = 0;
        for _ in 0..payloads {
            let len = 1 + noise.next() as usize % 256;
            let mut nal = vec![header];
            nal.extend((0..len).map(|_| noise.next() as u8));
            if parser
                .clone()
                .push(&length_prefixed(&[&nal], 4), avc)
                .is_ok()
            {
                accepted += 1;
            }
        }
        accepted as f64 / payloads as f64
    }

    #[test]
    fn random_bytes_behind_an_idr_header_are_rejected() {
        const PAYLOADS: usize = 20_000;
        let cabac = PpsSpec {
            cabac: true,
            transform_8x8: Some(true),
            ..PpsSpec::default()
        };
        let deblocking = PpsSpec {
            deblocking_control: true,
            ..PpsSpec::default()
        };
        for (label, pps) in [
            ("CAVLC", PpsSpec::default()),
            ("CAVLC, deblocking control", deblocking),
            ("CABAC", cabac),
        ] {
            let mut parser = StreamParser::new();
            let idr = SliceSpec {
                cabac: pps.cabac,
                ..SliceSpec::idr()
            };
            let au = annex_b(&[&sps(0), &pps.nal(), &idr.nal()]);
            push_ok(&mut parser, &au, BS);
            let idr_rate = acceptance(&parser, 0x65, PAYLOADS, 0x2545_f491_4f6c_dd1d);
            let p_rate = acceptance(&parser, 0x41, PAYLOADS, 0x9e37_79b9_7f4a_7c15);
            println!(
                "{label}: random IDR payloads accepted {:.3}%, random non-IDR {:.3}%",
                100.0 * idr_rate,
                100.0 * p_rate
            );
            assert!(idr_rate < 0.02, "{label}: {idr_rate}");
        }
    }
}
