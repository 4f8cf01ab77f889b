//! The replayer's names for the query rules of [`format::query`] (the one home of values per
//! query, result layout, decoding and timestamp scaling): the engine decodes captured and replayed
//! results bytes through [`decode`], which reports a layout problem as a message.

pub use format::query::{
    counter_value, timestamp_ns, DecodedQuery as Decoded, PoolShape, QueryKind, RESULT_64,
    RESULT_PARTIAL, RESULT_WAIT, RESULT_WITH_AVAILABILITY as RESULT_AVAILABILITY,
    RESULT_WITH_STATUS as RESULT_STATUS,
};

/// Decodes `count` queries from `data` laid out with `stride` and `flags` (see
/// [`format::query::decode`]); `call_result` is the read's `VkResult`.
pub fn decode(
    data: &[u8],
    count: u32,
    stride: u64,
    flags: u32,
    shape: PoolShape,
    call_result: i32,
) -> Result<Vec<Decoded>, String> {
    format::query::decode(shape, data, count, stride, flags, call_result).map_err(|e| e.to_string())
}

/// Stable name of a `VkQueryType` (the key of the comparison summary).
pub fn type_name(query_type: i32) -> String {
    QueryKind::from_raw(query_type).name()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_passes_layout_problems_on_as_messages() {
        let occ = PoolShape {
            query_type: 0,
            pipeline_statistics: 0,
            perf_counters: 0,
        };
        let d = decode(&[7, 0, 0, 0, 1, 0, 0, 0], 1, 8, RESULT_AVAILABILITY, occ, 1).unwrap();
        assert_eq!((d[0].values.clone(), d[0].available), (vec![7], true));
        let e = decode(&[], 3, 8, RESULT_64, occ, 0).unwrap_err();
        assert!(e.contains("0 bytes hold fewer than 3 queries"), "{e}");
        assert_eq!(type_name(2), "TIMESTAMP");
        assert_eq!(type_name(1_000_382_000), "PRIMITIVES_GENERATED");
    }
}
