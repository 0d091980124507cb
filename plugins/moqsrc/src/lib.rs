//! GStreamer plugin moqsrc.
