//! End-to-end pipeline tests: moqsink → moqsrc (filled in by the foundation work).
