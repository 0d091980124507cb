//! GStreamer plugin moqsink.
