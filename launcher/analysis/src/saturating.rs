//! Sums that stop at the 64-bit limit instead of wrapping: a crafted trace can give events
//! durations and byte counts near it, and a wrapped total would print as a negative time.

/// `x.add_sat(y)` is `x += y`, saturating.
pub trait AddSat: Copy {
    fn add_sat(&mut self, y: Self);
    fn sub_sat(&mut self, y: Self);
}

macro_rules! add_sat {
    ($($t:ty),*) => {$(
        impl AddSat for $t {
            fn add_sat(&mut self, y: Self) {
                *self = self.saturating_add(y);
            }
            fn sub_sat(&mut self, y: Self) {
                *self = self.saturating_sub(y);
            }
        }
    )*};
}

add_sat!(i64, u64, usize);

/// The saturating sum of `it`.
pub fn sum<T: AddSat + Default>(it: impl IntoIterator<Item = T>) -> T {
    let mut s = T::default();
    for x in it {
        s.add_sat(x);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stops_at_the_limit() {
        let mut x = i64::MAX - 1;
        x.add_sat(5);
        assert_eq!(x, i64::MAX);
        x.sub_sat(i64::MAX);
        assert_eq!(x, 0);
        assert_eq!(sum([u64::MAX, 1, 2]), u64::MAX);
        assert_eq!(sum([3i64, -1]), 2);
    }
}
