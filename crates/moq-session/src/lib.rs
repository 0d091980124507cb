//! MoQ Transport sessions over QUIC (quinn): publisher and subscriber
