//! Media mapping of H.264 onto MoQ tracks, groups and objects; receiver reorder and playout logic
