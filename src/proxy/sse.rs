//! Server-sent events as the MCP Streamable HTTP transport uses them: an incremental parser
//! that cuts a byte stream into whole events, keeping each event's exact bytes so events the
//! guard does not touch are forwarded byte for byte, and a writer for the events it rewrites.

use bytes::{Bytes, BytesMut};

/// One complete event: its exact bytes (terminating blank line included) and its fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    pub raw: Bytes,
    pub id: Option<String>,
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`; `None` when the event has no data line.
    pub data: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    #[error("an event grew past {limit} bytes without ending")]
    TooLarge { limit: usize },
}

/// Cuts a byte stream into events. Lines end in CRLF, LF or CR; an event ends at a blank
/// line. An event split anywhere, even between the CR and LF of one line break, is seen
/// whole, and an event is complete as soon as its last line break arrives.
#[derive(Debug)]
pub struct SseParser {
    buf: BytesMut,
    /// Where the next unread line of the current event starts in `buf`.
    line_start: usize,
    limit: usize,
    /// A UTF-8 byte-order mark may open the stream, and only the stream.
    at_stream_start: bool,
    /// The last read ended in CR: an LF opening the next read belongs to that line break,
    /// not a blank line of its own.
    pending_lf: bool,
}

impl SseParser {
    /// `limit` bounds one event, so a stream that never ends an event cannot grow memory
    /// without bound.
    pub fn new(limit: usize) -> SseParser {
        SseParser {
            buf: BytesMut::new(),
            line_start: 0,
            limit,
            at_stream_start: true,
            pending_lf: false,
        }
    }

    /// Feeds one read; returns the events it completed, in order.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, SseError> {
        if chunk.is_empty() {
            return Ok(Vec::new());
        }
        self.buf.extend_from_slice(chunk);
        if std::mem::take(&mut self.pending_lf) && chunk[0] == b'\n' {
            // It stays in the bytes (forwarded with the next event) but ends no line.
            self.line_start += 1;
        }
        let mut out = Vec::new();
        loop {
            let rest = &self.buf[self.line_start..];
            let Some(i) = memchr::memchr2(b'\r', b'\n', rest) else {
                break;
            };
            let end = self.line_start + i;
            let term = if self.buf[end] == b'\n' {
                1
            } else if end + 1 < self.buf.len() {
                if self.buf[end + 1] == b'\n' { 2 } else { 1 }
            } else {
                // A CR ends what has arrived: the line has ended either way, so do not
                // hold the event back waiting to see whether an LF follows.
                self.pending_lf = true;
                1
            };
            let empty_line = end == self.line_start;
            self.line_start = end + term;
            if empty_line {
                let raw = self.buf.split_to(self.line_start).freeze();
                self.line_start = 0;
                out.push(parse_event(raw, std::mem::take(&mut self.at_stream_start)));
            }
        }
        if self.buf.len() > self.limit {
            return Err(SseError::TooLarge { limit: self.limit });
        }
        Ok(out)
    }
}

/// Reads the fields of one complete event (the SSE processing rules: comments skipped, one
/// space after the colon dropped, `data` lines joined, an `id` with NUL ignored).
fn parse_event(raw: Bytes, stream_start: bool) -> SseEvent {
    let mut text = String::from_utf8_lossy(&raw).into_owned();
    if stream_start && text.starts_with('\u{feff}') {
        text.drain(..'\u{feff}'.len_utf8());
    }
    let (mut id, mut event, mut data) = (None, None, None::<String>);
    for line in lines(&text) {
        if line.is_empty() || line.starts_with(':') {
            continue;
        }
        let (name, value) = match line.split_once(':') {
            Some((n, v)) => (n, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match name {
            "data" => match data.as_mut() {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => data = Some(value.to_string()),
            },
            "event" => event = Some(value.to_string()),
            "id" if !value.contains('\0') => id = Some(value.to_string()),
            _ => {}
        }
    }
    SseEvent {
        raw,
        id,
        event,
        data,
    }
}

/// Splits on CRLF, LF or CR.
fn lines(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        match rest.find(['\r', '\n']) {
            Some(i) => {
                let line = &rest[..i];
                let skip = if rest[i..].starts_with("\r\n") { 2 } else { 1 };
                rest = &rest[i + skip..];
                Some(line)
            }
            None => {
                let line = rest;
                rest = "";
                Some(line)
            }
        }
    })
}

/// Writes an event with the given fields. `data` may span lines; each becomes a `data:` line.
pub fn write_event(id: Option<&str>, event: Option<&str>, data: &str) -> Bytes {
    let mut out = String::with_capacity(data.len() + 32);
    if let Some(event) = event {
        out.push_str("event: ");
        out.push_str(event);
        out.push('\n');
    }
    if let Some(id) = id {
        out.push_str("id: ");
        out.push_str(id);
        out.push('\n');
    }
    for line in lines(data) {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    if data.is_empty() {
        out.push_str("data: \n");
    }
    out.push('\n');
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(parser: &mut SseParser, parts: &[&[u8]]) -> Vec<SseEvent> {
        parts.iter().flat_map(|p| parser.push(p).unwrap()).collect()
    }

    #[test]
    fn one_event_in_one_read() {
        let mut p = SseParser::new(1024);
        let ev = feed(&mut p, &[b"event: message\nid: 7\ndata: {\"a\":1}\n\n"]);
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].event.as_deref(), Some("message"));
        assert_eq!(ev[0].id.as_deref(), Some("7"));
        assert_eq!(ev[0].data.as_deref(), Some("{\"a\":1}"));
        assert_eq!(
            &ev[0].raw[..],
            b"event: message\nid: 7\ndata: {\"a\":1}\n\n"
        );
    }

    #[test]
    fn an_event_split_across_reads_at_every_byte_is_seen_whole() {
        let stream = b"id: 1\r\ndata: first\r\n\r\n: keep-alive\r\n\r\ndata: second\r\n\r\n";
        for cut in 1..stream.len() {
            let mut p = SseParser::new(1024);
            let ev = feed(&mut p, &[&stream[..cut], &stream[cut..]]);
            assert_eq!(ev.len(), 3, "cut at {cut}");
            assert_eq!(ev[0].data.as_deref(), Some("first"));
            assert_eq!(ev[1].data, None, "a comment-only event has no data");
            assert_eq!(ev[2].data.as_deref(), Some("second"));
            let raw: Vec<u8> = ev.iter().flat_map(|e| e.raw.to_vec()).collect();
            // Cut between the final CR and LF, the LF waits for an event that never comes.
            let want = if cut == stream.len() - 1 {
                &stream[..cut]
            } else {
                &stream[..]
            };
            assert_eq!(raw, want, "bytes pass through unchanged (cut at {cut})");
        }
    }

    #[test]
    fn byte_by_byte_reads() {
        let stream = b"data: a\ndata: b\n\n";
        let mut p = SseParser::new(1024);
        let parts: Vec<&[u8]> = stream.chunks(1).collect();
        let ev = feed(&mut p, &parts);
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].data.as_deref(), Some("a\nb"));
    }

    #[test]
    fn multi_line_data_and_field_forms() {
        let mut p = SseParser::new(1024);
        let ev = feed(
            &mut p,
            &[b"data:no-space\ndata:  two spaces\ndata\nid: a\0b\nretry: 10\n\n"],
        );
        assert_eq!(ev[0].data.as_deref(), Some("no-space\n two spaces\n"));
        assert_eq!(ev[0].id, None, "an id with NUL is ignored");
    }

    #[test]
    fn bare_cr_line_endings() {
        let mut p = SseParser::new(1024);
        let ev = feed(&mut p, &[b"data: x\r", b"\rdata: y\r\r"]);
        assert_eq!(ev.len(), 2);
        assert_eq!(ev[0].data.as_deref(), Some("x"));
        assert_eq!(ev[1].data.as_deref(), Some("y"));
    }

    #[test]
    fn a_cr_ending_a_read_ends_the_event_and_the_lf_after_it_is_no_blank_line() {
        let mut p = SseParser::new(1024);
        let ev = p.push(b"data: x\r\n\r").unwrap();
        assert_eq!(ev.len(), 1, "not held back");
        assert_eq!(&ev[0].raw[..], b"data: x\r\n\r");
        assert!(p.push(b"\n").unwrap().is_empty());
        let ev = p.push(b"data: y\r").unwrap();
        assert!(ev.is_empty());
        let ev = p.push(b"\n\r\n").unwrap();
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].data.as_deref(), Some("y"));
        assert_eq!(&ev[0].raw[..], b"\ndata: y\r\n\r\n");
    }

    #[test]
    fn a_byte_order_mark_opens_the_stream_only() {
        let mut p = SseParser::new(1024);
        let ev = feed(&mut p, &["\u{feff}data: a\n\n".as_bytes(), b"data: b\n\n"]);
        assert_eq!(ev[0].data.as_deref(), Some("a"));
        assert_eq!(ev[1].data.as_deref(), Some("b"));
    }

    #[test]
    fn an_event_that_never_ends_is_bounded() {
        let mut p = SseParser::new(16);
        assert!(p.push(b"data: 0123").is_ok());
        assert_eq!(
            p.push(b"456789abcdef"),
            Err(SseError::TooLarge { limit: 16 })
        );
    }

    #[test]
    fn written_events_parse_back() {
        let bytes = write_event(Some("9"), Some("message"), "{\"x\":\"a\"}\nsecond");
        let mut p = SseParser::new(1024);
        let ev = p.push(&bytes).unwrap();
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].id.as_deref(), Some("9"));
        assert_eq!(ev[0].event.as_deref(), Some("message"));
        assert_eq!(ev[0].data.as_deref(), Some("{\"x\":\"a\"}\nsecond"));
    }
}
