//! Where the adapter's output goes: the start of stdout (up to a cap) and the end of stderr.
//!
//! Bookkeeping, and the one read that fills the head in place: memory stays bounded by the
//! cap plus one read (head) or by twice the kept length plus one read (tail), whatever the
//! adapter writes.

use rustix::buffer::spare_capacity;
use rustix::fd::BorrowedFd;

/// The first `cap` bytes of a stream, and how many were written in all.
#[derive(Debug)]
pub(crate) struct HeadSink {
    data: Vec<u8>,
    cap: u64,
    total: u64,
}

impl HeadSink {
    pub(crate) fn new(cap: u64) -> HeadSink {
        HeadSink {
            data: Vec::new(),
            cap,
            total: 0,
        }
    }

    /// Take a chunk; returns `true` once more than `cap` bytes were written. (The supervisor
    /// reads in place with [`HeadSink::read_from`]; this is the same bookkeeping for tests.)
    #[cfg(test)]
    pub(crate) fn push(&mut self, bytes: &[u8]) -> bool {
        self.total += bytes.len() as u64;
        let room = self.cap.saturating_sub(self.data.len() as u64);
        let take = usize::try_from(room).map_or(bytes.len(), |room| room.min(bytes.len()));
        self.data.extend_from_slice(&bytes[..take]);
        self.overflowed()
    }

    /// Read once from `fd` straight into the kept bytes (no intermediate copy), or into
    /// `scratch` only to count once the cap is reached. Returns what `read(2)` returned;
    /// `Ok(0)` is end of file.
    pub(crate) fn read_from(
        &mut self,
        fd: BorrowedFd<'_>,
        scratch: &mut Scratch,
    ) -> rustix::io::Result<usize> {
        let room =
            usize::try_from(self.cap.saturating_sub(self.data.len() as u64)).unwrap_or(usize::MAX);
        if room == 0 {
            let n = rustix::io::read(fd, scratch.get())?;
            self.total += n as u64;
            return Ok(n);
        }
        // The first read reserves one chunk; then the buffer doubles, but never past what the
        // cap needs plus one chunk (`reserve_exact`: `reserve` could round a late doubling up
        // to twice the cap), so reads fill it in place. Past `HUGE_PAGES_FROM` it takes all of
        // that at once, when the system lets it.
        let want = room.min(scratch.len()).max(1);
        let chunk = scratch.len();
        if self.data.capacity() - self.data.len() < want {
            let rest = room.saturating_add(chunk);
            if self.data.len() >= HUGE_PAGES_FROM && self.data.try_reserve_exact(rest).is_ok() {
                // A large answer: the rest of the cap at once (address space, not memory,
                // until it is written), so the buffer never moves again.
                advise_huge_pages(&mut self.data);
            } else {
                let grow = self.data.capacity().max(want).min(rest);
                self.data.reserve_exact(grow);
            }
        }
        let before = self.data.len();
        let n = rustix::io::read(fd, spare_capacity(&mut self.data))?;
        self.total += n as u64;
        // Past the cap: keep only the cap (the rest is counted, and ends the run).
        self.data.truncate(before + n.min(room));
        Ok(n)
    }

    pub(crate) fn overflowed(&self) -> bool {
        self.total > self.cap
    }

    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// The bytes kept so far.
    pub(crate) fn kept(&self) -> &[u8] {
        &self.data
    }

    pub(crate) fn into_data(self) -> Vec<u8> {
        self.data
    }
}

/// Once the kept stdout holds this much, the rest of the cap is reserved in one step and
/// backed by huge pages where the system allows them.
const HUGE_PAGES_FROM: usize = 4 << 20;

/// Ask for huge pages (`MADV_HUGEPAGE`) to back `data`'s spare capacity: one page fault and
/// one page-table entry per 2 MiB instead of 512, for a large answer written once and read
/// twice (what it saves: docs/PERFORMANCE.md). Only for a buffer that will not move again:
/// moving huge pages to an address of another alignment splits them, so a buffer that still
/// doubles gets no advice. A system without transparent huge pages (`never`), or short of free
/// 2 MiB blocks, refuses or falls back to small pages: nothing changes then but the speed.
fn advise_huge_pages(data: &mut Vec<u8>) {
    let page = rustix::param::page_size();
    let spare = data.spare_capacity_mut();
    let start = spare.as_mut_ptr() as usize;
    let skip = start.next_multiple_of(page) - start;
    let len = spare.len().saturating_sub(skip) / page * page;
    if len == 0 {
        return;
    }
    // SAFETY: the range lies inside this vector's allocation (its spare capacity, whole pages
    // of it); the advice changes how those pages are backed, never what they hold, and no
    // reference into the range exists while it is given.
    let _ = unsafe {
        rustix::mm::madvise(
            (start + skip) as *mut std::ffi::c_void,
            len,
            rustix::mm::Advice::LinuxHugepage,
        )
    };
}

/// A read buffer of one size, allocated (and zeroed) only when something is read into it:
/// a run whose adapter writes nothing on stderr and stays under the stdout cap never pays
/// for it.
pub(crate) struct Scratch {
    len: usize,
    buf: Vec<u8>,
}

impl Scratch {
    pub(crate) fn new(len: usize) -> Scratch {
        Scratch {
            len,
            buf: Vec::new(),
        }
    }

    /// The size it reads at most.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn get(&mut self) -> &mut [u8] {
        if self.buf.len() != self.len {
            self.buf = vec![0; self.len];
        }
        &mut self.buf
    }
}

/// The last `keep` bytes of a stream, and whether more than that was written.
#[derive(Debug)]
pub(crate) struct TailSink {
    data: Vec<u8>,
    keep: usize,
    total: u64,
}

impl TailSink {
    pub(crate) fn new(keep: usize) -> TailSink {
        TailSink {
            data: Vec::new(),
            keep,
            total: 0,
        }
    }

    pub(crate) fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        if bytes.len() >= self.keep {
            self.data.clear();
            self.data
                .extend_from_slice(&bytes[bytes.len() - self.keep..]);
            return;
        }
        self.data.extend_from_slice(bytes);
        // Cut only when twice the kept length is reached, so each byte is moved at most once
        // on average instead of on every push.
        if self.data.len() >= 2 * self.keep {
            let cut = self.data.len() - self.keep;
            self.data.drain(..cut);
        }
    }

    /// More was written than is kept.
    pub(crate) fn truncated(&self) -> bool {
        self.total > self.keep as u64
    }

    /// How many bytes were pushed in all.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    pub(crate) fn into_tail(mut self) -> Vec<u8> {
        if self.data.len() > self.keep {
            let cut = self.data.len() - self.keep;
            self.data.drain(..cut);
        }
        self.data
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_keeps_the_first_bytes_and_counts_all() {
        let mut head = HeadSink::new(5);
        assert!(!head.push(b"abc"));
        assert!(!head.push(b"de"), "exactly the cap is not an overflow");
        assert!(head.push(b"f"));
        assert!(head.push(b"ghij"));
        assert_eq!(head.total(), 10);
        assert_eq!(head.into_data(), b"abcde");
    }

    #[test]
    fn head_reads_in_place_up_to_the_cap_and_counts_the_rest() {
        let (read, write) = rustix::pipe::pipe().unwrap();
        let mut scratch = Scratch::new(4);
        let mut head = HeadSink::new(6);
        rustix::io::write(&write, b"abcdefghij").unwrap();
        drop(write);
        let mut reads = 0;
        while head
            .read_from(rustix::fd::AsFd::as_fd(&read), &mut scratch)
            .unwrap()
            > 0
        {
            reads += 1;
        }
        assert!(reads >= 3, "{reads}");
        assert!(
            head.data.capacity() <= 6 + scratch.len(),
            "{}",
            head.data.capacity()
        );
        assert!(head.overflowed());
        assert_eq!(head.total(), 10);
        assert_eq!(head.into_data(), b"abcdef");
        assert_eq!(scratch.buf.len(), 4, "used past the cap");
    }

    #[test]
    fn the_scratch_buffer_is_not_made_while_reads_fit_under_the_cap() {
        let (read, write) = rustix::pipe::pipe().unwrap();
        let mut scratch = Scratch::new(64 * 1024);
        let mut head = HeadSink::new(100);
        rustix::io::write(&write, b"abcdefghij").unwrap();
        drop(write);
        while head
            .read_from(rustix::fd::AsFd::as_fd(&read), &mut scratch)
            .unwrap()
            > 0
        {}
        assert_eq!(head.into_data(), b"abcdefghij");
        assert_eq!(scratch.buf.capacity(), 0);
    }

    #[test]
    fn head_with_a_zero_cap_keeps_nothing() {
        let mut head = HeadSink::new(0);
        assert!(!head.push(b""));
        assert!(head.push(b"x"));
        assert_eq!(head.into_data(), b"");
    }

    #[test]
    fn tail_keeps_the_last_bytes_across_many_small_pushes() {
        let mut tail = TailSink::new(4);
        let mut all = Vec::new();
        for i in 0..100u8 {
            tail.push(&[i, i]);
            all.extend_from_slice(&[i, i]);
        }
        assert!(tail.truncated());
        assert_eq!(tail.into_tail(), &all[all.len() - 4..]);
    }

    #[test]
    fn tail_handles_a_push_longer_than_it_keeps() {
        let mut tail = TailSink::new(3);
        tail.push(b"ab");
        tail.push(b"cdefg");
        assert_eq!(tail.into_tail(), b"efg");
    }

    #[test]
    fn tail_is_not_truncated_at_exactly_its_length() {
        let mut tail = TailSink::new(4);
        tail.push(b"ab");
        tail.push(b"cd");
        assert!(!tail.truncated());
        tail.push(b"e");
        assert!(tail.truncated());
        assert_eq!(tail.into_tail(), b"bcde");
    }

    #[test]
    fn tail_memory_stays_bounded() {
        let mut tail = TailSink::new(1000);
        for _ in 0..10_000 {
            tail.push(&[b'x'; 333]);
            assert!(tail.data.len() < 2 * 1000 + 333);
        }
    }

    #[test]
    fn a_large_head_reserves_the_rest_of_its_cap_once_and_keeps_every_byte() {
        let (read, write) = rustix::pipe::pipe().unwrap();
        let total = HUGE_PAGES_FROM * 3 / 2 + 12_345;
        let cap = (2 * HUGE_PAGES_FROM) as u64;
        let writer = std::thread::spawn(move || {
            let bytes: Vec<u8> = (0..total).map(|i| (i % 251) as u8).collect();
            let mut done = 0;
            while done < bytes.len() {
                done += rustix::io::write(&write, &bytes[done..]).unwrap();
            }
        });
        let mut scratch = Scratch::new(64 * 1024);
        let mut head = HeadSink::new(cap);
        let mut places = Vec::new();
        while head
            .read_from(rustix::fd::AsFd::as_fd(&read), &mut scratch)
            .unwrap()
            > 0
        {
            if head.data.len() > HUGE_PAGES_FROM {
                places.push((head.data.as_ptr(), head.data.capacity()));
            }
        }
        writer.join().unwrap();
        // Past the threshold the buffer holds the whole cap plus one read, and never moves.
        assert!(!places.is_empty());
        assert!(places.iter().all(|&p| p == places[0]), "moved");
        assert_eq!(places[0].1, cap as usize + scratch.len());
        assert_eq!(head.total(), total as u64);
        let data = head.into_data();
        assert!(data.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
    }
}
