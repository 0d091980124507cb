//! The documentation cannot drift from the code: docs/elements.md is what the elements'
//! ParamSpecs and signals say (regenerate it with `MOQT_UPDATE_DOCS=1 cargo test --test
//! docs`), and every relative link in README.md, docs/ and benchmarks/README.md resolves.

mod common;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use gst::glib;
use gst::prelude::*;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// What the signals do: GLib keeps no description of its own for them.
const SIGNALS: [(&str, &str, &str); 2] = [
    (
        "moqsink",
        "drain",
        "Action signal, listening only: sends GOAWAY to every direct subscriber, naming the \
         session URI given (or none), so moqsrc viewers open a new session there (this moqsink \
         or another publishing the same stream), take over from the last frame played and leave this one.",
    ),
    (
        "moqsink",
        "object-handoff",
        "With `signal-object-handoffs=true`: QUIC took an object whole for a subscriber. \
         Arguments: track, group, object, when moqsink wrote it and when QUIC took its last \
         byte (µs since the UNIX epoch). Emitted from the network thread.",
    ),
];

fn value_text(value: &glib::Value) -> String {
    if let Ok(b) = value.get::<bool>() {
        return format!("`{b}`");
    }
    if let Ok(s) = value.get::<Option<String>>() {
        return s.map_or("—".into(), |s| format!("`{s}`"));
    }
    if let Some((_, enum_value)) = glib::EnumValue::from_value(value) {
        return format!("`{}`", enum_value.nick());
    }
    value
        .transform::<String>()
        .ok()
        .and_then(|v| v.get::<String>().ok())
        .map_or("—".into(), |s| format!("`{s}`"))
}

/// `min – max`, or `≥ min` when the type's own maximum is the only bound.
fn bounds(min: impl std::fmt::Display, max: impl std::fmt::Display, unbounded: bool) -> String {
    let min = min.to_string();
    if unbounded && min == "0" {
        String::new()
    } else if unbounded {
        format!("≥ {min}")
    } else {
        format!("{min} – {max}")
    }
}

fn range_text(pspec: &glib::ParamSpec) -> String {
    if let Some(p) = pspec.downcast_ref::<glib::ParamSpecUInt>() {
        return bounds(p.minimum(), p.maximum(), p.maximum() == u32::MAX);
    }
    if let Some(p) = pspec.downcast_ref::<glib::ParamSpecUInt64>() {
        return bounds(p.minimum(), p.maximum(), p.maximum() == u64::MAX);
    }
    if let Some(p) = pspec.downcast_ref::<glib::ParamSpecInt>() {
        return bounds(p.minimum(), p.maximum(), p.maximum() == i32::MAX);
    }
    if let Some(p) = pspec.downcast_ref::<glib::ParamSpecEnum>() {
        return p
            .enum_class()
            .values()
            .iter()
            .map(|v| format!("`{}`", v.nick()))
            .collect::<Vec<_>>()
            .join(", ");
    }
    String::new()
}

/// As a launch line or an application sees it.
fn type_name(type_: glib::Type) -> String {
    match type_.name() {
        "gchararray" => "string".into(),
        "gboolean" => "boolean".into(),
        other => other.into(),
    }
}

fn when_text(pspec: &glib::ParamSpec) -> &'static str {
    let flags = pspec.flags();
    if flags.contains(glib::ParamFlags::DEPRECATED) {
        "deprecated"
    } else if !flags.contains(glib::ParamFlags::WRITABLE) {
        "read-only"
    } else if flags.contains(gst::PARAM_FLAG_MUTABLE_PLAYING) {
        "any state"
    } else if flags.contains(gst::PARAM_FLAG_MUTABLE_READY) {
        "NULL, READY"
    } else {
        "writable"
    }
}

/// The properties `type_` itself defines (not those of GstObject, GstBin or GstPad).
fn property_table(out: &mut String, type_: glib::Type) {
    let class = glib::object::ObjectClass::from_type(type_).expect("an object type");
    let mut specs: Vec<_> = class
        .list_properties()
        .iter()
        .filter(|p| p.owner_type() == type_)
        .cloned()
        .collect();
    specs.sort_by_key(|p| p.name().to_owned());
    out.push_str(
        "| property | type | default | range | set in | what |\n|---|---|---|---|---|---|\n",
    );
    for pspec in specs {
        let blurb = pspec.blurb().unwrap_or_default().replace('|', "\\|");
        let default = if pspec.flags().contains(glib::ParamFlags::WRITABLE) {
            value_text(pspec.default_value())
        } else {
            "—".into()
        };
        writeln!(
            out,
            "| `{}` | {} | {} | {} | {} | {} |",
            pspec.name(),
            type_name(pspec.value_type()),
            default,
            range_text(&pspec),
            when_text(&pspec),
            blurb
        )
        .unwrap();
    }
}

/// The signals `type_` itself defines. GLib lists them; glib-rs has no call for it.
fn own_signals(type_: glib::Type) -> Vec<glib::subclass::SignalId> {
    use glib::translate::{FromGlib, IntoGlib};
    let mut count = 0u32;
    // SAFETY: g_signal_list_ids returns a newly allocated array of `count` ids of
    // registered signals (NULL for none), freed here after the ids are copied.
    unsafe {
        let ids = glib::gobject_ffi::g_signal_list_ids(type_.into_glib(), &mut count);
        if ids.is_null() {
            return Vec::new();
        }
        let list = std::slice::from_raw_parts(ids, count as usize)
            .iter()
            .map(|&id| glib::subclass::SignalId::from_glib(id))
            .collect();
        glib::ffi::g_free(ids.cast());
        list
    }
}

fn elements_md() -> String {
    common::init();
    let mut out = String::from(
        "# Element reference\n\n\
         Generated from the elements' ParamSpecs and signals by `tests/docs.rs` (the test \
         command checks it is current; `MOQT_UPDATE_DOCS=1 cargo test --test docs` rewrites \
         it). `gst-inspect-1.0 moqsink` and `gst-inspect-1.0 moqsrc` show the same. Times are \
         in ms and bitrates in bit/s; \"set in\" is the states in which a property may be \
         changed. Bus messages and `stats` fields: [messages.md](messages.md).\n",
    );
    let sink = gst::ElementFactory::make("moqsink").build().unwrap();
    let src = gst::ElementFactory::make("moqsrc").build().unwrap();
    for (name, element) in [("moqsink", &sink), ("moqsrc", &src)] {
        let factory = element.factory().unwrap();
        writeln!(
            out,
            "\n## {name}\n\n{} — {}\n",
            factory.longname(),
            factory.description()
        )
        .unwrap();
        property_table(&mut out, element.type_());
        if name == "moqsink" {
            out.push_str("\n## moqsink pads\n\nProperties of the request pads `video_%u` and `audio_%u`.\n\n");
            property_table(
                &mut out,
                glib::Type::from_name("GstMoqSinkPad").expect("moqsink registers its pad type"),
            );
        }
    }
    out.push_str("\n## Signals\n\n| element | signal | arguments | what |\n|---|---|---|---|\n");
    for (element_name, element) in [("moqsink", &sink), ("moqsrc", &src)] {
        for id in own_signals(element.type_()) {
            let query = id.query();
            let name = query.signal_name();
            let what = SIGNALS
                .iter()
                .find(|(e, s, _)| *e == element_name && *s == name)
                .map(|(_, _, what)| *what)
                .unwrap_or_else(|| {
                    panic!("signal {element_name}::{name} has no description in tests/docs.rs")
                });
            let arguments = query
                .param_types()
                .iter()
                .map(|t| type_name(t.type_()))
                .collect::<Vec<_>>()
                .join(", ");
            writeln!(out, "| {element_name} | `{name}` | {arguments} | {what} |").unwrap();
        }
    }
    out
}

#[test]
fn the_element_reference_is_what_the_elements_say() {
    let generated = elements_md();
    let path = Path::new(ROOT).join("docs/elements.md");
    if std::env::var_os("MOQT_UPDATE_DOCS").is_some() {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "docs/elements.md differs from the elements: regenerate it with \
         MOQT_UPDATE_DOCS=1 cargo test --test docs"
    );
}

/// GitHub's anchor for a heading.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(markdown: &str) -> Vec<String> {
    let mut fenced = false;
    markdown
        .lines()
        .filter(|line| {
            if line.starts_with("```") {
                fenced = !fenced;
            }
            !fenced && line.starts_with('#')
        })
        .map(|line| slug(line.trim_start_matches('#')))
        .collect()
}

/// The targets of `[text](target)` links outside code.
fn links(markdown: &str) -> Vec<String> {
    let mut fenced = false;
    let mut found = Vec::new();
    for line in markdown.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        }
        if fenced {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            if let Some(end) = rest.find(')') {
                found.push(rest[..end].to_owned());
                rest = &rest[end..];
            }
        }
    }
    found
}

#[test]
fn every_link_in_the_readme_and_docs_resolves() {
    let mut files: Vec<PathBuf> = vec![Path::new(ROOT).join("README.md")];
    for dir in ["docs", "benchmarks"] {
        for entry in std::fs::read_dir(Path::new(ROOT).join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for target in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let resolved = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            if !resolved.exists() {
                broken.push(format!("{}: {target} (no such file)", file.display()));
                continue;
            }
            if !anchor.is_empty() {
                let target_text = std::fs::read_to_string(&resolved).unwrap_or_default();
                if !anchors(&target_text).iter().any(|a| a == anchor) {
                    broken.push(format!("{}: {target} (no such heading)", file.display()));
                }
            }
        }
    }
    eprintln!("{checked} links checked in {} files", files.len());
    assert!(checked > 0, "no links found: the check itself is broken");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn slugs_follow_github() {
    assert_eq!(
        slug(" Through a relay (moq-relay)"),
        "through-a-relay-moq-relay"
    );
    assert_eq!(slug("moqsink pads"), "moqsink-pads");
    assert_eq!(
        links("see [a](docs/x.md#y) and [b](#z)\n```\n[c](nope)\n```"),
        ["docs/x.md#y", "#z"]
    );
}
