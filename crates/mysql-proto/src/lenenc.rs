//! Length-encoded integers and strings, bounded reads over a byte slice.

use crate::Error;

/// A cursor over a packet payload; every read checks bounds.
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    /// Reads `buf`, naming the packet in errors.
    pub fn new(buf: &'a [u8], what: &'static str) -> Self {
        Reader { buf, pos: 0, what }
    }

    fn short(&self) -> Error {
        Error::malformed(self.what, "truncated")
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    /// True when everything was read.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// Reads `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], Error> {
        let end = self.pos.checked_add(n).ok_or_else(|| self.short())?;
        let s = self.buf.get(self.pos..end).ok_or_else(|| self.short())?;
        self.pos = end;
        Ok(s)
    }

    /// Reads one byte.
    pub fn u8(&mut self) -> Result<u8, Error> {
        Ok(self.bytes(1)?[0])
    }

    /// Reads a little-endian u16.
    pub fn u16(&mut self) -> Result<u16, Error> {
        let b = self.bytes(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    /// Reads a little-endian u32.
    pub fn u32(&mut self) -> Result<u32, Error> {
        let b = self.bytes(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Reads a NUL-terminated string (without the NUL). A missing NUL takes the rest.
    pub fn null_str(&mut self) -> Result<&'a [u8], Error> {
        let rest = self.remaining();
        match rest.iter().position(|&b| b == 0) {
            Some(i) => {
                self.pos += i + 1;
                Ok(&rest[..i])
            }
            None => {
                self.pos = self.buf.len();
                Ok(rest)
            }
        }
    }

    /// Reads a length-encoded integer.
    pub fn lenenc_int(&mut self) -> Result<u64, Error> {
        let first = self.u8()?;
        Ok(match first {
            0xfc => u64::from(self.u16()?),
            0xfd => {
                let b = self.bytes(3)?;
                u64::from(b[0]) | u64::from(b[1]) << 8 | u64::from(b[2]) << 16
            }
            0xfe => {
                let b = self.bytes(8)?;
                u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
            }
            0xfb | 0xff => {
                return Err(Error::malformed(
                    self.what,
                    "invalid length-encoded integer",
                ));
            }
            n => u64::from(n),
        })
    }

    /// Reads a length-encoded string.
    pub fn lenenc_bytes(&mut self) -> Result<&'a [u8], Error> {
        let n = self.lenenc_int()?;
        let n = usize::try_from(n).map_err(|_| self.short())?;
        self.bytes(n)
    }
}

/// Appends a length-encoded integer.
pub fn put_lenenc_int(out: &mut Vec<u8>, n: u64) {
    if n < 251 {
        out.push(n as u8);
    } else if n < 1 << 16 {
        out.push(0xfc);
        out.extend_from_slice(&(n as u16).to_le_bytes());
    } else if n < 1 << 24 {
        out.push(0xfd);
        out.extend_from_slice(&(n as u32).to_le_bytes()[..3]);
    } else {
        out.push(0xfe);
        out.extend_from_slice(&n.to_le_bytes());
    }
}

/// Appends a length-encoded string.
pub fn put_lenenc_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_lenenc_int(out, b.len() as u64);
    out.extend_from_slice(b);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn lenenc_roundtrip(n in any::<u64>()) {
            let mut v = Vec::new();
            put_lenenc_int(&mut v, n);
            let mut r = Reader::new(&v, "t");
            prop_assert_eq!(r.lenenc_int().unwrap(), n);
            prop_assert!(r.is_empty());
        }

        #[test]
        fn reader_never_panics(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut r = Reader::new(&data, "t");
            let _ = r.lenenc_bytes();
            let _ = r.null_str();
            let _ = r.u32();
            let _ = r.lenenc_int();
        }
    }
}
