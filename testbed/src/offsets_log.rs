//! What Kafka itself recorded of the commits of consumer groups: the offset commit records of
//! `__consumer_offsets`, read from the start of its log and decoded, so that a test counts commits
//! without trusting the operator's account of them.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};

/// Every offset commit record of the `__consumer_offsets` of the cluster at `bootstrap`, from the
/// start of its log, in order within each of its partitions (one holds all of a group's commits, in
/// the order Kafka recorded them): (group, topic, partition, commit metadata).
pub fn commits(bootstrap: &str) -> Vec<(String, String, i32, String)> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("enable.auto.commit", "false")
        .set("group.id", "flow-testbed-offsets-reader")
        .create()
        .expect("consumer");
    let md = c.fetch_metadata(Some("__consumer_offsets"), Duration::from_secs(10)).expect("metadata");
    let partitions: Vec<i32> = md.topics().iter().flat_map(|t| t.partitions().iter().map(|p| p.id())).collect();
    let mut ends = BTreeMap::new();
    let mut tpl = TopicPartitionList::new();
    for p in partitions {
        let (low, high) = c.fetch_watermarks("__consumer_offsets", p, Duration::from_secs(10)).expect("watermarks");
        if high > low {
            ends.insert(p, high);
            tpl.add_partition_offset("__consumer_offsets", p, Offset::Offset(low)).expect("offset");
        }
    }
    c.assign(&tpl).expect("assign");
    let mut out = vec![];
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !ends.is_empty() {
        assert!(std::time::Instant::now() < deadline, "reading __consumer_offsets took too long: {ends:?} left");
        let Some(m) = c.poll(Duration::from_millis(500)) else { continue };
        // An error a consumer reports between records (a broker of the cluster that is down, as in
        // the broker pair's test) is not the end of the log: reading goes on, within the deadline.
        let Ok(m) = m else { continue };
        if ends.get(&m.partition()).is_some_and(|end| m.offset() + 1 >= *end) {
            ends.remove(&m.partition());
        }
        let (Some(key), Some(value)) = (m.key(), m.payload()) else { continue };
        if let (Some((group, topic, partition)), Some(meta)) = (offset_key(key), offset_metadata(value)) {
            out.push((group, topic, partition, meta));
        }
    }
    out
}

/// Reads Kafka's wire encoding of the records of `__consumer_offsets` (the coordinator's
/// `OffsetCommitKey` and `OffsetCommitValue` schemas).
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        (self.0.len() >= n).then(|| {
            let (head, rest) = self.0.split_at(n);
            self.0 = rest;
            head
        })
    }
    fn i16(&mut self) -> Option<i16> {
        Some(i16::from_be_bytes(self.take(2)?.try_into().ok()?))
    }
    fn i32(&mut self) -> Option<i32> {
        Some(i32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }
    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }
    fn varint(&mut self) -> Option<u64> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.take(1)?[0];
            n |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(n);
            }
        }
        None
    }
    /// A string with an i16 length (`-1`: null, read as empty).
    fn string(&mut self) -> Option<String> {
        let n = self.i16()?;
        if n < 0 {
            return Some(String::new());
        }
        Some(String::from_utf8_lossy(self.take(usize::try_from(n).ok()?)?).into_owned())
    }
    /// A compact string: unsigned varint length + 1 (`0`: null, read as empty).
    fn compact_string(&mut self) -> Option<String> {
        let n = self.varint()?;
        if n == 0 {
            return Some(String::new());
        }
        Some(String::from_utf8_lossy(self.take(usize::try_from(n - 1).ok()?)?).into_owned())
    }
}

/// (group, topic, partition) of an offset commit key (versions 0 and 1); `None` for other records.
fn offset_key(key: &[u8]) -> Option<(String, String, i32)> {
    let mut r = Reader(key);
    if !matches!(r.i16()?, 0 | 1) {
        return None;
    }
    Some((r.string()?, r.string()?, r.i32()?))
}

/// The commit metadata of an offset commit value (versions 0 to 4).
fn offset_metadata(value: &[u8]) -> Option<String> {
    let mut r = Reader(value);
    match r.i16()? {
        0..=2 => {
            r.i64()?;
            r.string()
        }
        3 => {
            r.i64()?;
            r.i32()?;
            r.string()
        }
        4 => {
            r.i64()?;
            r.i32()?;
            r.compact_string()
        }
        _ => None,
    }
}
