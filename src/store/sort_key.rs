//! Order-preserving byte encoding of the store's keys: for two keys `a` and `b` of one table,
//! the byte strings [`SortKey::sort_key`] gives compare (lexicographically, as `memcmp`, SQL's
//! `bytea` and every ordered key-value store compare them) in the order redb's
//! [`redb::Key::compare`] puts `a` and `b`.
//!
//! redb orders a table by its key type's own comparison (integers by value from their
//! little-endian bytes, strings and byte slices lexicographically, tuples element by element).
//! A backend that only orders raw bytes — a PostgreSQL table keyed by `bytea`, the planned
//! multi-node store (docs/architecture.md, "Beyond one machine") — needs these bytes to answer
//! the range scans the services make (`range((org, 0)..(org, u64::MAX))` and the like) in the
//! same order. Decoding is never needed: such a backend keeps redb's own encoding of the key
//! beside its sort key and decodes that.
//!
//! The encoding, per key type: unsigned integers big-endian; `i64` big-endian with the sign bit
//! flipped; `bool` one byte; fixed arrays as they are; `&str` and `&[u8]` with every `0x00`
//! written `0x00 0xFF` and ended by `0x00 0x00`, so that no value is a prefix of another and a
//! shorter value sorts first; a tuple, its elements' encodings one after the other.

/// A key type of the store's tables with an order-preserving byte encoding (see the module
/// documentation).
pub trait SortKey {
    /// Appends this key's sort bytes to `out`.
    fn write_sort_key(&self, out: &mut Vec<u8>);

    /// This key's sort bytes.
    fn sort_key(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(32);
        self.write_sort_key(&mut out);
        out
    }
}

macro_rules! unsigned {
    ($($t:ty),*) => {$(
        impl SortKey for $t {
            fn write_sort_key(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_be_bytes());
            }
        }
    )*};
}

unsigned!(u8, u16, u32, u64, u128);

impl SortKey for i64 {
    fn write_sort_key(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&((*self as u64) ^ (1 << 63)).to_be_bytes());
    }
}

impl SortKey for bool {
    fn write_sort_key(&self, out: &mut Vec<u8>) {
        out.push(u8::from(*self));
    }
}

impl<const N: usize> SortKey for [u8; N] {
    fn write_sort_key(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self);
    }
}

impl SortKey for [u8] {
    fn write_sort_key(&self, out: &mut Vec<u8>) {
        for &b in self {
            out.push(b);
            if b == 0 {
                out.push(0xFF);
            }
        }
        out.extend_from_slice(&[0, 0]);
    }
}

impl SortKey for str {
    fn write_sort_key(&self, out: &mut Vec<u8>) {
        self.as_bytes().write_sort_key(out);
    }
}

impl<T: SortKey + ?Sized> SortKey for &T {
    fn write_sort_key(&self, out: &mut Vec<u8>) {
        (**self).write_sort_key(out);
    }
}

impl SortKey for () {
    fn write_sort_key(&self, _: &mut Vec<u8>) {}
}

macro_rules! tuple {
    ($($name:ident),+) => {
        impl<$($name: SortKey),+> SortKey for ($($name,)+) {
            #[allow(non_snake_case)]
            fn write_sort_key(&self, out: &mut Vec<u8>) {
                let ($($name,)+) = self;
                $($name.write_sort_key(out);)+
            }
        }
    };
}

tuple!(A);
tuple!(A, B);
tuple!(A, B, C);
tuple!(A, B, C, D);
tuple!(A, B, C, D, E);

#[cfg(test)]
mod tests {
    use std::cmp::Ordering;
    use std::fmt::Debug;

    use redb::Key;

    use super::*;

    /// A small deterministic generator (xorshift64*), so a failure is reproducible.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }

        /// A value from a few that collide often (0, 1, the maximum, a small number) or any.
        fn int(&mut self, max: u128) -> u128 {
            match self.next() % 5 {
                0 => 0,
                1 => max,
                2 => u128::from(self.next() % 4).min(max),
                _ => (u128::from(self.next()) << 64 | u128::from(self.next())) & max,
            }
        }

        /// Short byte strings over an alphabet with the bytes the escaping cares about.
        fn bytes(&mut self) -> Vec<u8> {
            const ALPHABET: [u8; 6] = [0x00, 0x01, 0xFE, 0xFF, b'a', b'b'];
            (0..self.next() % 5).map(|_| ALPHABET[(self.next() % 6) as usize]).collect()
        }

        fn text(&mut self) -> String {
            const ALPHABET: [&str; 6] = ["\0", "a", "b", "é", "\u{10FFFF}", "~"];
            (0..self.next() % 5).map(|_| ALPHABET[(self.next() % 6) as usize]).collect()
        }
    }

    /// For `pairs` pairs of keys made by `make`: the sort bytes compare as redb compares the keys.
    fn agrees<K>(pairs: usize, mut make: impl FnMut(&mut Rng) -> K::SelfType<'static>)
    where
        K: Key + 'static,
        for<'a> K::SelfType<'a>: SortKey + Debug,
    {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for _ in 0..pairs {
            let (a, b) = (make(&mut rng), make(&mut rng));
            let (ra, rb) = (K::as_bytes(&a), K::as_bytes(&b));
            let redb = K::compare(ra.as_ref(), rb.as_ref());
            let ours = a.sort_key().cmp(&b.sort_key());
            assert_eq!(ours, redb, "{a:?} against {b:?}");
            assert_eq!(a.sort_key() == b.sort_key(), redb == Ordering::Equal);
        }
    }

    #[test]
    fn integers_and_flags_sort_as_redb_sorts_them() {
        agrees::<u128>(2000, |r| r.int(u128::MAX));
        agrees::<u64>(2000, |r| r.int(u64::MAX.into()) as u64);
        agrees::<u32>(2000, |r| r.int(u32::MAX.into()) as u32);
        agrees::<u8>(500, |r| r.int(u8::MAX.into()) as u8);
        agrees::<i64>(2000, |r| r.int(u64::MAX.into()) as u64 as i64);
        agrees::<bool>(50, |r| r.next() % 2 == 0);
    }

    #[test]
    fn strings_and_bytes_sort_as_redb_sorts_them() {
        agrees::<&str>(3000, |r| Box::leak(r.text().into_boxed_str()));
        agrees::<&[u8]>(3000, |r| Box::leak(r.bytes().into_boxed_slice()));
        agrees::<&[u8; 32]>(500, |r| {
            let mut a = [0u8; 32];
            a[31] = (r.next() % 3) as u8;
            a[0] = (r.next() % 2) as u8;
            Box::leak(Box::new(a))
        });
    }

    /// The tuple shapes of `store::tables`, with variable-length elements in the middle, where
    /// a prefix-free encoding matters (followed by integers of every size, whose first byte may
    /// be anything, `0xFF` included).
    #[test]
    fn tuples_sort_as_redb_sorts_them() {
        agrees::<(u128, u32)>(3000, |r| (r.int(3), r.int(u32::MAX.into()) as u32));
        agrees::<(u128, &str)>(3000, |r| (r.int(2), Box::leak(r.text().into_boxed_str())));
        agrees::<(u128, &str, &str, u128)>(3000, |r| {
            let s = |r: &mut Rng| -> &'static str { Box::leak(r.text().into_boxed_str()) };
            (r.int(1), s(r), s(r), r.int(u128::MAX))
        });
        agrees::<(u128, u8, &[u8], u64)>(3000, |r| {
            (r.int(1), (r.next() % 2) as u8, Box::leak(r.bytes().into_boxed_slice()), r.int(u64::MAX.into()) as u64)
        });
        agrees::<(u128, &str, &str, &str, bool)>(3000, |r| {
            let s = |r: &mut Rng| -> &'static str { Box::leak(r.text().into_boxed_str()) };
            (r.int(1), s(r), s(r), s(r), r.next() % 2 == 0)
        });
        agrees::<(u128, u128, u64)>(3000, |r| (r.int(2), r.int(2), r.int(u64::MAX.into()) as u64));
    }

    /// A range scan of the services (`(org, 0)..=(org, MAX)`) selects in sort bytes exactly the
    /// keys redb's range selects.
    #[test]
    fn a_prefix_range_selects_the_same_keys() {
        let mut rng = Rng(7);
        let keys: Vec<(u128, u64)> = (0..500).map(|_| (rng.int(3), rng.int(u64::MAX.into()) as u64)).collect();
        let (lo, hi) = ((2u128, 0u64).sort_key(), (2u128, u64::MAX).sort_key());
        for k in keys {
            let in_redb = k.0 == 2;
            let sk = k.sort_key();
            assert_eq!(lo <= sk && sk <= hi, in_redb, "{k:?}");
        }
    }
}
