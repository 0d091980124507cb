//! Trace-driven userspace UDP bottleneck link emulator
