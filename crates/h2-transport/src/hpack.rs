//! HPACK (RFC 7541) for the HTTP/2 client: a complete decoder (static and dynamic tables,
//! Huffman strings, size updates), because a server may use all of it, and an encoder with its
//! own dynamic table (insertion, eviction, size updates when the peer's table size changes)
//! that never Huffman-codes.

use std::collections::VecDeque;
use std::sync::OnceLock;

/// A header block that does not decode; the connection cannot continue (RFC 9113 §4.3).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("HPACK: {0}")]
pub struct HpackError(pub &'static str);

/// RFC 7541 Appendix A.
pub const STATIC_TABLE: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// Per-entry overhead in the table size (RFC 7541 §4.1).
pub const ENTRY_OVERHEAD: usize = 32;

/// A dynamic table entry: name and value.
type Entry = (Box<[u8]>, Box<[u8]>);

/// The dynamic table as the server's encoder fills it, newest entry first.
pub struct Decoder {
    table: VecDeque<Entry>,
    size: usize,
    max_size: usize,
    /// Our SETTINGS_HEADER_TABLE_SIZE: no size update may exceed it.
    limit: usize,
}

impl Decoder {
    pub fn new(limit: usize) -> Self {
        Decoder {
            table: VecDeque::new(),
            size: 0,
            max_size: limit,
            limit,
        }
    }

    /// Decodes one complete header block, calling `field(name, value)` for each field in order.
    pub fn decode(
        &mut self,
        block: &[u8],
        mut field: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), HpackError> {
        let mut buf = block;
        let mut at_start = true;
        while let Some(&first) = buf.first() {
            if first & 0x80 != 0 {
                let index = decode_int(&mut buf, 7)?;
                let (name, value) = self.entry(index)?;
                field(name, value);
            } else if first & 0x40 != 0 {
                let index = decode_int(&mut buf, 6)?;
                let name: Box<[u8]> = if index == 0 {
                    read_string(&mut buf)?.into()
                } else {
                    self.entry(index)?.0.into()
                };
                let value: Box<[u8]> = read_string(&mut buf)?.into();
                field(&name, &value);
                self.insert(name, value);
            } else if first & 0x20 != 0 {
                if !at_start {
                    return Err(HpackError("table size update after a field"));
                }
                let size = decode_int(&mut buf, 5)?;
                if size > self.limit {
                    return Err(HpackError(
                        "table size update above SETTINGS_HEADER_TABLE_SIZE",
                    ));
                }
                self.max_size = size;
                self.evict_to(size);
                continue;
            } else {
                // Literal without indexing (0000) or never indexed (0001): same layout.
                let index = decode_int(&mut buf, 4)?;
                if index == 0 {
                    let name = read_string(&mut buf)?;
                    let value = read_string(&mut buf)?;
                    field(&name, &value);
                } else {
                    let (name, _) = self.entry(index)?;
                    let value = read_string(&mut buf)?;
                    field(name, &value);
                }
            }
            at_start = false;
        }
        Ok(())
    }

    /// The table's invariant: its entries fit its maximum, which fits our limit.
    #[cfg(test)]
    pub(crate) fn size_within_limit(&self) -> bool {
        self.size <= self.max_size && self.max_size <= self.limit
    }

    fn entry(&self, index: usize) -> Result<(&[u8], &[u8]), HpackError> {
        match index {
            0 => Err(HpackError("index 0")),
            1..=61 => {
                let (name, value) = STATIC_TABLE[index - 1];
                Ok((name.as_bytes(), value.as_bytes()))
            }
            _ => self
                .table
                .get(index - 62)
                .map(|(name, value)| (&name[..], &value[..]))
                .ok_or(HpackError("index beyond the dynamic table")),
        }
    }

    fn insert(&mut self, name: Box<[u8]>, value: Box<[u8]>) {
        let size = name.len() + value.len() + ENTRY_OVERHEAD;
        if size > self.max_size {
            // Not an error: the table is emptied (RFC 7541 §4.4).
            self.table.clear();
            self.size = 0;
            return;
        }
        self.evict_to(self.max_size - size);
        self.size += size;
        self.table.push_front((name, value));
    }

    fn evict_to(&mut self, target: usize) {
        while self.size > target {
            let (name, value) = self.table.pop_back().expect("size counts entries");
            self.size -= name.len() + value.len() + ENTRY_OVERHEAD;
        }
    }
}

/// The size of a header list as SETTINGS_MAX_HEADER_LIST_SIZE counts it (RFC 9113 §6.5.2).
pub fn field_size(name: &[u8], value: &[u8]) -> usize {
    name.len() + value.len() + ENTRY_OVERHEAD
}

/// How a field may enter the peer's dynamic table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Indexing {
    /// Added to the table when the table is in use and the entry fits (§6.2.1).
    Incremental,
    /// A literal without indexing (§6.2.2): for values that never repeat, like `:path`.
    Without,
}

/// The encoder's view of the peer decoder's dynamic table. Every block it encodes must be
/// sent, in order: the table changes as the block is written.
pub struct Encoder {
    table: VecDeque<Entry>,
    size: usize,
    /// The table size in use; never above `cap` nor the peer's SETTINGS_HEADER_TABLE_SIZE.
    max_size: usize,
    /// The most we use, whatever the peer allows.
    cap: usize,
    /// Whether the peer's table size is known (its SETTINGS arrived); before that nothing is
    /// indexed.
    active: bool,
    /// The smallest table size since the last block, when a size update is due (§4.2).
    pending_min: Option<usize>,
}

impl Encoder {
    /// An encoder that uses at most `cap` bytes of the peer's table (HPACK's initial size is
    /// 4,096, so `cap` above that only takes effect once the peer allows it).
    pub fn new(cap: usize) -> Self {
        Encoder {
            table: VecDeque::new(),
            size: 0,
            max_size: cap.min(4096),
            cap,
            active: false,
            pending_min: None,
        }
    }

    /// The peer's SETTINGS_HEADER_TABLE_SIZE: the table size in use changes to the smaller of
    /// it and our cap, and the next block starts with the size update(s).
    pub fn set_peer_table_size(&mut self, size: usize) {
        self.active = true;
        let new = size.min(self.cap);
        if new != self.max_size {
            self.pending_min = Some(self.pending_min.map_or(new, |m| m.min(new)));
            self.max_size = new;
            self.evict_to(new);
        }
    }

    /// Starts a block: the table size updates owed since the last one.
    pub fn begin_block(&mut self, out: &mut Vec<u8>) {
        if let Some(min) = self.pending_min.take() {
            if min < self.max_size {
                encode_int(out, 0x20, 5, min);
            }
            encode_int(out, 0x20, 5, self.max_size);
        }
    }

    /// Appends one field: indexed when the table holds it, otherwise a literal whose name is
    /// indexed when a table holds the name (`static_name`, if given, is its index in the
    /// static table), added to the table per `indexing`.
    pub fn field(
        &mut self,
        out: &mut Vec<u8>,
        name: &[u8],
        value: &[u8],
        static_name: Option<usize>,
        indexing: Indexing,
    ) {
        if let Some(pos) = self
            .table
            .iter()
            .position(|(n, v)| &n[..] == name && &v[..] == value)
        {
            encode_int(out, 0x80, 7, 62 + pos);
            return;
        }
        let name_index = static_name.or_else(|| {
            self.table
                .iter()
                .position(|(n, _)| &n[..] == name)
                .map(|pos| 62 + pos)
        });
        let index = indexing == Indexing::Incremental
            && self.active
            && field_size(name, value) <= self.max_size;
        let (first, prefix) = if index { (0x40, 6) } else { (0x00, 4) };
        match name_index {
            Some(i) => encode_int(out, first, prefix, i),
            None => {
                out.push(first);
                encode_str(out, name);
            }
        }
        encode_str(out, value);
        if index {
            let size = field_size(name, value);
            self.evict_to(self.max_size - size);
            self.size += size;
            self.table.push_front((name.into(), value.into()));
        }
    }

    /// Any field, the static table searched for it: fully indexed when it holds the pair
    /// (the client's own heads know their static indices; tests and fuzzing use this).
    #[cfg(test)]
    pub fn any_field(&mut self, out: &mut Vec<u8>, name: &[u8], value: &[u8], indexing: Indexing) {
        let mut static_name = None;
        for (i, (n, v)) in STATIC_TABLE.iter().enumerate() {
            if n.as_bytes() == name {
                if v.as_bytes() == value {
                    encode_int(out, 0x80, 7, i + 1);
                    return;
                }
                static_name.get_or_insert(i + 1);
            }
        }
        self.field(out, name, value, static_name, indexing);
    }

    fn evict_to(&mut self, target: usize) {
        while self.size > target {
            let (name, value) = self.table.pop_back().expect("size counts entries");
            self.size -= field_size(&name, &value);
        }
    }

    #[cfg(test)]
    pub(crate) fn table_size(&self) -> (usize, usize) {
        (self.table.len(), self.size)
    }
}

/// An integer with an `prefix_bits`-bit prefix (RFC 7541 §5.1).
pub fn decode_int(buf: &mut &[u8], prefix_bits: u32) -> Result<usize, HpackError> {
    let mask = (1usize << prefix_bits) - 1;
    let (&first, rest) = buf.split_first().ok_or(HpackError("truncated integer"))?;
    *buf = rest;
    let mut value = first as usize & mask;
    if value < mask {
        return Ok(value);
    }
    let mut shift = 0u32;
    loop {
        let (&byte, rest) = buf.split_first().ok_or(HpackError("truncated integer"))?;
        *buf = rest;
        if shift > 28 {
            return Err(HpackError("integer too large"));
        }
        value += ((byte & 0x7f) as usize) << shift;
        shift += 7;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
}

/// A string literal (RFC 7541 §5.2): borrowed when raw, decoded when Huffman-coded.
fn read_string<'a>(buf: &mut &'a [u8]) -> Result<std::borrow::Cow<'a, [u8]>, HpackError> {
    let huffman = buf.first().ok_or(HpackError("truncated string"))? & 0x80 != 0;
    let len = decode_int(buf, 7)?;
    if len > buf.len() {
        return Err(HpackError("string longer than the block"));
    }
    let (raw, rest) = buf.split_at(len);
    *buf = rest;
    if huffman {
        huffman_decode(raw).map(std::borrow::Cow::Owned)
    } else {
        Ok(std::borrow::Cow::Borrowed(raw))
    }
}

/// Appends an integer with `prefix_bits` bits of prefix; `first` holds the representation's
/// leading bits.
pub fn encode_int(out: &mut Vec<u8>, first: u8, prefix_bits: u32, value: usize) {
    let mask = (1usize << prefix_bits) - 1;
    if value < mask {
        out.push(first | value as u8);
        return;
    }
    out.push(first | mask as u8);
    let mut rest = value - mask;
    while rest >= 0x80 {
        out.push((rest & 0x7f) as u8 | 0x80);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// Appends a raw (not Huffman-coded) string literal.
pub fn encode_str(out: &mut Vec<u8>, s: &[u8]) {
    encode_int(out, 0, 7, s.len());
    out.extend_from_slice(s);
}

/// Huffman code of each byte value (RFC 7541 Appendix B), as generated in the `h2` crate
/// (src/hpack/huffman/table.rs, MIT licence); EOS (all ones, 30 bits) is handled apart.
const CODES: [u32; 256] = [
    0x1ff8, 0x7fffd8, 0xfffffe2, 0xfffffe3, 0xfffffe4, 0xfffffe5, 0xfffffe6, 0xfffffe7, 0xfffffe8,
    0xffffea, 0x3ffffffc, 0xfffffe9, 0xfffffea, 0x3ffffffd, 0xfffffeb, 0xfffffec, 0xfffffed,
    0xfffffee, 0xfffffef, 0xffffff0, 0xffffff1, 0xffffff2, 0x3ffffffe, 0xffffff3, 0xffffff4,
    0xffffff5, 0xffffff6, 0xffffff7, 0xffffff8, 0xffffff9, 0xffffffa, 0xffffffb, 0x14, 0x3f8,
    0x3f9, 0xffa, 0x1ff9, 0x15, 0xf8, 0x7fa, 0x3fa, 0x3fb, 0xf9, 0x7fb, 0xfa, 0x16, 0x17, 0x18,
    0x0, 0x1, 0x2, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x5c, 0xfb, 0x7ffc, 0x20, 0xffb,
    0x3fc, 0x1ffa, 0x21, 0x5d, 0x5e, 0x5f, 0x60, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68,
    0x69, 0x6a, 0x6b, 0x6c, 0x6d, 0x6e, 0x6f, 0x70, 0x71, 0x72, 0xfc, 0x73, 0xfd, 0x1ffb, 0x7fff0,
    0x1ffc, 0x3ffc, 0x22, 0x7ffd, 0x3, 0x23, 0x4, 0x24, 0x5, 0x25, 0x26, 0x27, 0x6, 0x74, 0x75,
    0x28, 0x29, 0x2a, 0x7, 0x2b, 0x76, 0x2c, 0x8, 0x9, 0x2d, 0x77, 0x78, 0x79, 0x7a, 0x7b, 0x7ffe,
    0x7fc, 0x3ffd, 0x1ffd, 0xffffffc, 0xfffe6, 0x3fffd2, 0xfffe7, 0xfffe8, 0x3fffd3, 0x3fffd4,
    0x3fffd5, 0x7fffd9, 0x3fffd6, 0x7fffda, 0x7fffdb, 0x7fffdc, 0x7fffdd, 0x7fffde, 0xffffeb,
    0x7fffdf, 0xffffec, 0xffffed, 0x3fffd7, 0x7fffe0, 0xffffee, 0x7fffe1, 0x7fffe2, 0x7fffe3,
    0x7fffe4, 0x1fffdc, 0x3fffd8, 0x7fffe5, 0x3fffd9, 0x7fffe6, 0x7fffe7, 0xffffef, 0x3fffda,
    0x1fffdd, 0xfffe9, 0x3fffdb, 0x3fffdc, 0x7fffe8, 0x7fffe9, 0x1fffde, 0x7fffea, 0x3fffdd,
    0x3fffde, 0xfffff0, 0x1fffdf, 0x3fffdf, 0x7fffeb, 0x7fffec, 0x1fffe0, 0x1fffe1, 0x3fffe0,
    0x1fffe2, 0x7fffed, 0x3fffe1, 0x7fffee, 0x7fffef, 0xfffea, 0x3fffe2, 0x3fffe3, 0x3fffe4,
    0x7ffff0, 0x3fffe5, 0x3fffe6, 0x7ffff1, 0x3ffffe0, 0x3ffffe1, 0xfffeb, 0x7fff1, 0x3fffe7,
    0x7ffff2, 0x3fffe8, 0x1ffffec, 0x3ffffe2, 0x3ffffe3, 0x3ffffe4, 0x7ffffde, 0x7ffffdf,
    0x3ffffe5, 0xfffff1, 0x1ffffed, 0x7fff2, 0x1fffe3, 0x3ffffe6, 0x7ffffe0, 0x7ffffe1, 0x3ffffe7,
    0x7ffffe2, 0xfffff2, 0x1fffe4, 0x1fffe5, 0x3ffffe8, 0x3ffffe9, 0xffffffd, 0x7ffffe3, 0x7ffffe4,
    0x7ffffe5, 0xfffec, 0xfffff3, 0xfffed, 0x1fffe6, 0x3fffe9, 0x1fffe7, 0x1fffe8, 0x7ffff3,
    0x3fffea, 0x3fffeb, 0x1ffffee, 0x1ffffef, 0xfffff4, 0xfffff5, 0x3ffffea, 0x7ffff4, 0x3ffffeb,
    0x7ffffe6, 0x3ffffec, 0x3ffffed, 0x7ffffe7, 0x7ffffe8, 0x7ffffe9, 0x7ffffea, 0x7ffffeb,
    0xffffffe, 0x7ffffec, 0x7ffffed, 0x7ffffee, 0x7ffffef, 0x7fffff0, 0x3ffffee,
];

/// Length in bits of each code in [`CODES`].
const CODE_LENGTHS: [u8; 256] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28,
    28, 28, 28, 28, 28, 28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5,
    5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6,
    6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22,
    23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22,
    21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20,
    22, 22, 22, 23, 22, 22, 23, 26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19,
    21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22,
    22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
];

/// The EOS symbol, which must never appear in a string (only its prefix, as padding).
const EOS: u16 = 256;
/// A tree node child: another node's index, or a leaf (`LEAF | symbol`).
const LEAF: u16 = 0x8000;

/// The code tree, built once from [`CODES`]: node 0 is the root, each node has two children.
fn tree() -> &'static [[u16; 2]] {
    static TREE: OnceLock<Vec<[u16; 2]>> = OnceLock::new();
    TREE.get_or_init(|| {
        let mut nodes = vec![[0u16; 2]];
        let codes = CODES
            .iter()
            .zip(CODE_LENGTHS)
            .enumerate()
            .map(|(symbol, (&code, len))| (symbol as u16, code, len))
            .chain(std::iter::once((EOS, 0x3fff_ffff, 30)));
        for (symbol, code, len) in codes {
            let mut node = 0usize;
            for i in (0..len).rev() {
                let bit = ((code >> i) & 1) as usize;
                if i == 0 {
                    nodes[node][bit] = LEAF | symbol;
                } else {
                    if nodes[node][bit] == 0 {
                        nodes.push([0; 2]);
                        nodes[node][bit] = (nodes.len() - 1) as u16;
                    }
                    node = nodes[node][bit] as usize;
                }
            }
        }
        nodes
    })
}

/// Decodes a Huffman-coded string; padding must be at most 7 bits, all ones (§5.2).
pub fn huffman_decode(coded: &[u8]) -> Result<Vec<u8>, HpackError> {
    let tree = tree();
    let mut out = Vec::with_capacity(coded.len() * 8 / 5 + 1);
    let mut node = 0usize;
    let mut pending_bits = 0u32;
    let mut pending_all_ones = true;
    for &byte in coded {
        for i in (0..8).rev() {
            let bit = ((byte >> i) & 1) as usize;
            let next = tree[node][bit];
            pending_bits += 1;
            pending_all_ones &= bit == 1;
            if next & LEAF != 0 {
                let symbol = next & !LEAF;
                if symbol == EOS {
                    return Err(HpackError("EOS in a Huffman string"));
                }
                out.push(symbol as u8);
                node = 0;
                pending_bits = 0;
                pending_all_ones = true;
            } else if next == 0 {
                return Err(HpackError("invalid Huffman code"));
            } else {
                node = next as usize;
            }
        }
    }
    if pending_bits > 7 || !pending_all_ones {
        return Err(HpackError("invalid Huffman padding"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn decode_all(decoder: &mut Decoder, block: &str) -> Vec<(String, String)> {
        let mut fields = Vec::new();
        decoder
            .decode(&hex(block), |n, v| {
                fields.push((
                    String::from_utf8_lossy(n).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                ))
            })
            .unwrap();
        fields
    }

    /// RFC 7541 C.6: responses with Huffman coding and a 256-byte table that evicts, as
    /// encoded by an independent implementation (Python's `hpack`), which led the first block
    /// with the size update to 256.
    #[test]
    fn decodes_huffman_responses_with_eviction() {
        let mut decoder = Decoder::new(4096);
        let date = "Mon, 21 Oct 2013 20:13:21 GMT";
        let first = decode_all(
            &mut decoder,
            "3fe101488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a62d1bff6e919d29ad171863c78f0b97c8e9ae82ae43d3",
        );
        let expected = [
            (":status", "302"),
            ("cache-control", "private"),
            ("date", date),
            ("location", "https://www.example.com"),
        ];
        let pairs = |v: &[(&str, &str)]| {
            v.iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(first, pairs(&expected));
        assert_eq!((decoder.table.len(), decoder.size), (4, 222));
        let second = decode_all(&mut decoder, "4883640effc1c0bf");
        assert_eq!(second[0], (":status".into(), "307".into()));
        assert_eq!(second[1..], pairs(&expected[1..])[..]);
        assert_eq!((decoder.table.len(), decoder.size), (4, 222));
        let third = decode_all(
            &mut decoder,
            "88c16196d07abe941054d444a8200595040b8166e084a62d1bffc05a839bd9ab77ad94e7821dd7f2e6c7b335dfdfcd5b3960d5af27087f3672c1ab270fb5291f9587316065c003ed4ee5b1063d5007",
        );
        assert_eq!(
            third,
            pairs(&[
                (":status", "200"),
                ("cache-control", "private"),
                ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
                ("location", "https://www.example.com"),
                ("content-encoding", "gzip"),
                (
                    "set-cookie",
                    "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"
                ),
            ])
        );
        // RFC 7541 C.6.3: three entries, 215 bytes, after two evictions.
        assert_eq!((decoder.table.len(), decoder.size), (3, 215));
    }

    #[test]
    fn decodes_raw_literals_and_new_names() {
        let mut decoder = Decoder::new(4096);
        let mut fields = Vec::new();
        decoder
            .decode(
                &hex("88400b677270632d73746174757301304007782d62797465730600c3bfc3a97e"),
                |n, v| fields.push((n.to_vec(), v.to_vec())),
            )
            .unwrap();
        assert_eq!(fields[0], (b":status".to_vec(), b"200".to_vec()));
        assert_eq!(fields[1], (b"grpc-status".to_vec(), b"0".to_vec()));
        assert_eq!(fields[2].1, "\u{0}\u{ff}é~".as_bytes());
    }

    #[test]
    fn rejects_what_the_rfc_forbids() {
        let mut decoder = Decoder::new(4096);
        let err = |d: &mut Decoder, block: &[u8]| d.decode(block, |_, _| {}).unwrap_err();
        assert_eq!(err(&mut decoder, &[0x80]).0, "index 0");
        assert_eq!(
            err(&mut decoder, &[0xbe]).0,
            "index beyond the dynamic table"
        );
        // A size update after a field, and one above our limit.
        assert_eq!(
            err(&mut decoder, &[0x88, 0x20]).0,
            "table size update after a field"
        );
        assert!(Decoder::new(100)
            .decode(&[0x3f, 0xe1, 0x01], |_, _| {})
            .is_err());
        // A string longer than the block; a truncated multi-byte integer.
        assert!(decoder.decode(&[0x40, 0x05, b'a'], |_, _| {}).is_err());
        assert!(decoder.decode(&[0xff, 0x80], |_, _| {}).is_err());
    }

    #[test]
    fn huffman_padding_and_eos_are_checked() {
        // 'a' is 00011: padded with ones it decodes, with zeros it does not.
        assert_eq!(huffman_decode(&[0x1f]).unwrap(), b"a");
        assert!(huffman_decode(&[0x18]).is_err());
        // Eight bits of padding is too much; EOS itself is never allowed.
        assert!(huffman_decode(&[0x1f, 0xff]).is_err());
        assert!(huffman_decode(&[0xff, 0xff, 0xff, 0xff]).is_err());
        // Every byte value decodes back from its own code.
        for byte in 0..=255u8 {
            let (code, len) = (
                CODES[byte as usize] as u64,
                CODE_LENGTHS[byte as usize] as u32,
            );
            let padding = (8 - len % 8) % 8;
            let bits = (code << padding) | ((1u64 << padding) - 1);
            let bytes = ((len + padding) / 8) as usize;
            let coded: Vec<u8> = (0..bytes).rev().map(|i| (bits >> (8 * i)) as u8).collect();
            assert_eq!(huffman_decode(&coded).unwrap(), [byte], "byte {byte}");
        }
    }

    #[test]
    fn integers_round_trip_at_prefix_boundaries() {
        // RFC 7541 C.1.
        let mut out = Vec::new();
        encode_int(&mut out, 0, 5, 1337);
        assert_eq!(out, [0x1f, 0x9a, 0x0a]);
        for prefix in [4, 5, 6, 7] {
            for value in [
                0,
                1,
                14,
                15,
                16,
                30,
                31,
                32,
                62,
                63,
                64,
                126,
                127,
                128,
                1 << 20,
            ] {
                let mut out = Vec::new();
                encode_int(&mut out, 0, prefix, value);
                let mut buf = &out[..];
                assert_eq!(decode_int(&mut buf, prefix).unwrap(), value);
                assert!(buf.is_empty());
            }
        }
    }

    fn lists(v: &[&[(&str, &str)]]) -> Vec<Vec<(String, String)>> {
        v.iter()
            .map(|l| {
                l.iter()
                    .map(|(n, v)| (n.to_string(), v.to_string()))
                    .collect()
            })
            .collect()
    }

    /// Encodes each list as the RFC's examples do (every field indexed), checks the bytes
    /// against the RFC when given, decodes them back and checks both tables' sizes.
    fn round_trip(table: usize, requests: &[Vec<(String, String)>], rfc: &[&str], sizes: &[usize]) {
        let mut encoder = Encoder::new(table);
        encoder.set_peer_table_size(table);
        let mut decoder = Decoder::new(table);
        for (i, list) in requests.iter().enumerate() {
            let mut block = Vec::new();
            encoder.begin_block(&mut block);
            for (n, v) in list {
                encoder.any_field(
                    &mut block,
                    n.as_bytes(),
                    v.as_bytes(),
                    Indexing::Incremental,
                );
            }
            if let Some(hex_block) = rfc.get(i) {
                assert_eq!(block, hex(hex_block), "block {i}");
            }
            let mut decoded = Vec::new();
            decoder
                .decode(&block, |n, v| {
                    decoded.push((
                        String::from_utf8_lossy(n).into_owned(),
                        String::from_utf8_lossy(v).into_owned(),
                    ))
                })
                .unwrap();
            assert_eq!(&decoded, list, "block {i}");
            assert_eq!(encoder.table_size().1, decoder.size, "block {i}");
            assert_eq!(decoder.size, sizes[i], "block {i}");
        }
    }

    const C3: [&[(&str, &str)]; 3] = [
        &[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            (":authority", "www.example.com"),
        ],
        &[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            (":authority", "www.example.com"),
            ("cache-control", "no-cache"),
        ],
        &[
            (":method", "GET"),
            (":scheme", "https"),
            (":path", "/index.html"),
            (":authority", "www.example.com"),
            ("custom-key", "custom-value"),
        ],
    ];

    const C5: [&[(&str, &str)]; 3] = [
        &[
            (":status", "302"),
            ("cache-control", "private"),
            ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
            ("location", "https://www.example.com"),
        ],
        &[
            (":status", "307"),
            ("cache-control", "private"),
            ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
            ("location", "https://www.example.com"),
        ],
        &[
            (":status", "200"),
            ("cache-control", "private"),
            ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
            ("location", "https://www.example.com"),
            ("content-encoding", "gzip"),
            (
                "set-cookie",
                "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
            ),
        ],
    ];

    /// RFC 7541 C.3 (requests) and C.5 (responses, 256-byte table with eviction): our
    /// encoder writes the RFC's bytes and our decoder reads them back; the same lists are
    /// C.4 and C.6 with Huffman coding, whose bytes the decoder tests above read.
    #[test]
    fn appendix_c_round_trips_byte_for_byte() {
        round_trip(
            4096,
            &lists(&C3),
            &[
                "828684410f7777772e6578616d706c652e636f6d",
                "828684be58086e6f2d6361636865",
                "828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565",
            ],
            &[57, 110, 164],
        );
        round_trip(
            256,
            &lists(&C5),
            &[
                "4803333032580770726976617465611d4d6f6e2c203231204f637420323031332032303a31333a323120474d546e1768747470733a2f2f7777772e6578616d706c652e636f6d",
                "4803333037c1c0bf",
                "88c1611d4d6f6e2c203231204f637420323031332032303a31333a323220474d54c05a04677a69707738666f6f3d4153444a4b48514b425a584f5157454f50495541585157454f49553b206d61782d6167653d333630303b2076657273696f6e3d31",
            ],
            &[222, 222, 215],
        );
    }

    /// RFC 7541 C.4: the C.3 requests with Huffman coding.
    #[test]
    fn decodes_huffman_requests() {
        let mut decoder = Decoder::new(4096);
        let blocks = [
            "828684418cf1e3c2e5f23a6ba0ab90f4ff",
            "828684be5886a8eb10649cbf",
            "828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf",
        ];
        for (i, block) in blocks.iter().enumerate() {
            let decoded = decode_all(&mut decoder, block);
            assert_eq!(decoded, lists(&C3)[i]);
        }
        assert_eq!(decoder.size, 164);
    }

    /// Random header lists through encoder and decoder, with the peer's table size changing
    /// between blocks: what comes out is what went in, and both tables agree on their size.
    #[test]
    fn random_header_lists_round_trip() {
        let mut rng = crate::fuzz::Rng::new(7);
        for _ in 0..200 {
            let mut encoder = Encoder::new(4096);
            let mut decoder = Decoder::new(4096);
            encoder.set_peer_table_size(4096);
            for _ in 0..20 {
                if rng.below(4) == 0 {
                    encoder.set_peer_table_size(rng.below(5000) as usize);
                }
                let list = rng.header_list();
                let mut block = Vec::new();
                encoder.begin_block(&mut block);
                for (n, v) in &list {
                    let indexing = if rng.below(3) == 0 {
                        Indexing::Without
                    } else {
                        Indexing::Incremental
                    };
                    encoder.any_field(&mut block, n, v, indexing);
                }
                let mut decoded = Vec::new();
                decoder
                    .decode(&block, |n, v| decoded.push((n.to_vec(), v.to_vec())))
                    .unwrap();
                assert_eq!(decoded, list);
                assert_eq!(encoder.table_size(), (decoder.table.len(), decoder.size));
                assert!(decoder.size <= decoder.max_size);
            }
        }
    }
}
