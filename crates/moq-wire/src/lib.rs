//! MoQ Transport wire codec (draft-ietf-moq-transport-14), free of I/O
