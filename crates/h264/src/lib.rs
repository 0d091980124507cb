//! H.264 access-unit parsing and frame classification
