//! Writing Sluice's TOML while remembering which source line each output line came from, so that
//! Sluice's own reader, run over the result, can point at the operator's file.

use crate::{ImportError, Note, Translation};
use toml::Value;

pub(crate) struct TomlDoc {
    header: String,
    top: Vec<String>,
    /// The `[table]` keys go to now (`None` after a `[[row]]`).
    current: Option<String>,
    body: Vec<(String, usize)>,
    notes: Vec<Note>,
}

impl TomlDoc {
    pub(crate) fn new(header: &str) -> TomlDoc {
        TomlDoc {
            header: header.to_string(),
            top: Vec::new(),
            current: None,
            body: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// A top-level key (`datadir`), written before every table.
    pub(crate) fn top_key(&mut self, key: &str, value: &Value) {
        self.top
            .push(format!("{} = {}", bare_or_quoted(key), inline(value)));
    }

    /// `[name]`, unless it is the table being written (a table opened twice is refused by
    /// the final check, never misplaced).
    pub(crate) fn table(&mut self, name: &str, line: usize) {
        let header = format!("[{name}]");
        if self.current.as_deref() != Some(header.as_str()) {
            self.blank();
            self.body.push((header.clone(), line));
            self.current = Some(header);
        }
    }

    /// `[[name]]`: a new row.
    pub(crate) fn row(&mut self, name: &str, line: usize) {
        self.blank();
        self.body.push((format!("[[{name}]]"), line));
        self.current = None;
    }

    pub(crate) fn key(&mut self, key: &str, value: &Value, line: usize) {
        self.body
            .push((format!("{} = {}", bare_or_quoted(key), inline(value)), line));
    }

    /// A setting that did not carry over: reported, and kept as a comment where it stood.
    pub(crate) fn note(
        &mut self,
        line: usize,
        setting: impl Into<String>,
        reason: impl Into<String>,
    ) {
        let note = Note {
            line,
            setting: setting.into(),
            reason: reason.into(),
        };
        self.body.push((
            format!(
                "# not carried over (line {line}): {}: {}",
                one_line(&note.setting),
                one_line(&note.reason)
            ),
            line,
        ));
        self.notes.push(note);
    }

    /// A remark in the output that is not a report (e.g. what a translated row stands for).
    pub(crate) fn comment(&mut self, text: &str, line: usize) {
        self.body.push((format!("# {}", one_line(text)), line));
    }

    fn blank(&mut self) {
        if self.body.last().is_some_and(|(l, _)| !l.is_empty()) {
            self.body.push((String::new(), 0));
        }
    }

    /// The document, checked by Sluice's reader; its warnings become notes at their source line.
    pub(crate) fn finish(mut self) -> Result<Translation, ImportError> {
        let mut text = String::new();
        let mut origin = Vec::new();
        for l in self.header.lines() {
            text.push_str(&format!("# {l}\n"));
            origin.push(0);
        }
        for t in &self.top {
            text.push_str(t);
            text.push('\n');
            origin.push(0);
        }
        if !self.top.is_empty() || !self.body.first().is_some_and(|(l, _)| l.is_empty()) {
            text.push('\n');
            origin.push(0);
        }
        for (l, src) in &self.body {
            text.push_str(l);
            text.push('\n');
            origin.push(*src);
        }
        let source_line = |msg: &str| {
            line_in(msg)
                .and_then(|n| origin.get(n.wrapping_sub(1)).copied())
                .unwrap_or(0)
        };
        match sluice_core::config::Config::parse(&text) {
            Ok(cfg) => {
                for w in cfg.warnings {
                    let line = source_line(&w);
                    self.notes.push(Note {
                        line,
                        setting: "(Sluice)".into(),
                        reason: w,
                    });
                }
                self.notes.sort_by_key(|n| n.line);
                Ok(Translation {
                    toml: text,
                    notes: self.notes,
                })
            }
            Err(e) => {
                let message = e.to_string();
                Err(ImportError::Refused {
                    line: source_line(&message),
                    message,
                })
            }
        }
    }
}

/// The first "line N" in a message of Sluice's reader.
fn line_in(msg: &str) -> Option<usize> {
    let at = msg.find("line ")? + 5;
    let digits: String = msg[at..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// A comment's text on one line: a value from the source cannot end the comment early.
fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

/// A value as TOML writes it inline; strings always as one-line basic strings (escaped), so
/// each output line stays one source line.
fn inline(v: &Value) -> String {
    match v {
        Value::String(s) => quoted(s),
        other => other.to_string(),
    }
}

fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn bare_or_quoted(key: &str) -> String {
    if !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        key.to_string()
    } else {
        quoted(key)
    }
}
