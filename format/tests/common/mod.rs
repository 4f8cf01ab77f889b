//! Synthetic records shared by the format tests.
#![allow(dead_code)]

use format::record::*;

pub fn header(kind: FileKind) -> Header {
    Header {
        kind,
        writer: "format-tests".into(),
        created_unix_ns: 1_700_000_000_000_000_000,
        device: Some(DeviceSummary {
            name: "test gpu".into(),
            vendor_id: 0x10de,
            device_id: 0x2330,
            timestamp_period_ns: 1.0,
            queue_families: vec![QueueFamilySummary {
                flags: 7,
                queue_count: 2,
                timestamp_valid_bits: 64,
            }],
            ..Default::default()
        }),
        application: "tests".into(),
    }
}

pub fn call(seq: u64, thread: u32) -> Record {
    Record::Call(Call {
        seq,
        thread,
        cmd: (seq % 7) as u32,
        host_ns: 1000 + seq * 13,
        result: 0,
        params: (0..(seq % 40) as u8).collect(),
    })
}

pub fn frame(index: u64, last_seq: u64) -> Record {
    Record::Frame(Frame {
        index,
        last_seq,
        host_ns: last_seq * 13,
        boundary: FrameBoundary::Present,
    })
}

pub fn command_table() -> Record {
    Record::CommandTable((0..7).map(|i| format!("vkCmd{i}")).collect())
}
