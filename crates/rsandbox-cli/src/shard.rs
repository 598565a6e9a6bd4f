//! `run --shard K/M`: the K-th of M deterministic parts of a batch, so that M machines
//! (a Slurm array, a CI matrix) grade one directory together with no coordination: each
//! file is in exactly one shard, whatever order the shards run in.

use std::fmt;
use std::str::FromStr;

/// The K-th (1-based) of M shards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// 1..=count.
    pub index: usize,
    /// At least 1.
    pub count: usize,
}

impl Shard {
    /// The files of this shard, round-robin over the batch's order (the command line's
    /// order, each directory's files sorted by name): neighbours go to different shards,
    /// so a directory of similar submissions spreads evenly. An index past the files is
    /// an empty shard, not an error (an array may be larger than a small directory).
    pub fn select<T>(&self, files: Vec<T>) -> Vec<T> {
        files.into_iter().enumerate().filter(|(i, _)| i % self.count == self.index - 1).map(|(_, f)| f).collect()
    }
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(text: &str) -> Result<Shard, String> {
        let bad = || format!("`{text}` is not a shard: write K/M with 1 <= K <= M, e.g. 3/8");
        let (index, count) = text.split_once('/').ok_or_else(bad)?;
        let index: usize = index.trim().parse().map_err(|_| bad())?;
        let count: usize = count.trim().parse().map_err(|_| bad())?;
        if count == 0 || index == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::Shard;

    #[test]
    fn every_file_is_in_exactly_one_shard() {
        let files: Vec<usize> = (0..2003).collect();
        for count in [1, 2, 7, 64, 5000] {
            let mut seen: Vec<usize> =
                (1..=count).flat_map(|index| Shard { index, count }.select(files.clone())).collect();
            seen.sort();
            assert_eq!(seen, files, "{count} shards");
        }
        assert_eq!(Shard { index: 2, count: 3 }.select(files)[..3], [1, 4, 7]);
    }

    #[test]
    fn shards_are_written_k_of_m() {
        assert_eq!("3/8".parse(), Ok(Shard { index: 3, count: 8 }));
        for bad in ["0/4", "5/4", "1/0", "2", "a/b", "-1/3", ""] {
            let error = bad.parse::<Shard>().unwrap_err();
            assert!(error.contains("K/M"), "{bad}: {error}");
        }
    }
}
