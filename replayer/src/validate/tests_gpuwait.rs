//! GPU-side waits (`gpuwait`) on hand-made call sequences: a copy with WAIT of a query nothing
//! writes, and a wait for an event nothing sets, are refused at their submission.

use vkstream::types::*;
use vkstream::{params as p, Call};

use super::tests::{command_buffer_0x60, ok, setup, DEVICE, QUEUE};
use super::Validator;

const POOL: u64 = 0x90;
const EVENT: u64 = 0xa0;
const DST: u64 = 0x70;

/// A validator with command buffer 0x60, a query pool of 4 queries, an event and a buffer
/// with memory, and the seq after them.
fn objects() -> (Validator, u64) {
    let (mut v, seq) = setup();
    command_buffer_0x60(&mut v, seq);
    let calls = [
        Call::vkCreateQueryPool(p::vkCreateQueryPool {
            device: DEVICE,
            p_create_info: Some(Box::new(VkQueryPoolCreateInfo {
                query_count: 4,
                ..Default::default()
            })),
            p_allocator: None,
            p_query_pool: Some(POOL),
        }),
        Call::vkCreateEvent(p::vkCreateEvent {
            device: DEVICE,
            p_create_info: Some(Box::default()),
            p_allocator: None,
            p_event: Some(EVENT),
        }),
        Call::vkCreateBuffer(p::vkCreateBuffer {
            device: DEVICE,
            p_create_info: Some(Box::new(VkBufferCreateInfo {
                size: 256,
                usage: 0x2,
                ..Default::default()
            })),
            p_allocator: None,
            p_buffer: Some(DST),
        }),
        Call::vkAllocateMemory(p::vkAllocateMemory {
            device: DEVICE,
            p_allocate_info: Some(Box::new(VkMemoryAllocateInfo {
                allocation_size: 256,
                ..Default::default()
            })),
            p_allocator: None,
            p_memory: Some(0x80),
        }),
        Call::vkBindBufferMemory(p::vkBindBufferMemory {
            device: DEVICE,
            buffer: DST,
            memory: 0x80,
            memory_offset: 0,
        }),
    ];
    let mut s = seq + 2;
    for c in &calls {
        ok(&mut v, c, s);
        s += 1;
    }
    (v, s)
}

/// Records `cmds` into command buffer 0x60 and gives its submission (checked, not replayed).
fn record(v: &mut Validator, seq: &mut u64, cmds: &[Call]) -> Call {
    let begin = Call::vkBeginCommandBuffer(p::vkBeginCommandBuffer {
        command_buffer: 0x60,
        p_begin_info: Some(Box::default()),
    });
    let end = Call::vkEndCommandBuffer(p::vkEndCommandBuffer {
        command_buffer: 0x60,
    });
    for c in std::iter::once(&begin).chain(cmds).chain([&end]) {
        ok(v, c, *seq);
        *seq += 1;
    }
    Call::vkQueueSubmit(p::vkQueueSubmit {
        queue: QUEUE,
        submit_count: 1,
        p_submits: Some(vec![VkSubmitInfo {
            command_buffer_count: 1,
            p_command_buffers: Some(vec![0x60]),
            ..Default::default()
        }]),
        fence: 0,
    })
}

fn reset() -> Call {
    Call::vkCmdResetQueryPool(p::vkCmdResetQueryPool {
        command_buffer: 0x60,
        query_pool: POOL,
        first_query: 0,
        query_count: 4,
    })
}

fn timestamp(query: u32) -> Call {
    Call::vkCmdWriteTimestamp(p::vkCmdWriteTimestamp {
        command_buffer: 0x60,
        pipeline_stage: 0x2000,
        query_pool: POOL,
        query,
    })
}

fn copy(first: u32, count: u32, flags: u32) -> Call {
    Call::vkCmdCopyQueryPoolResults(p::vkCmdCopyQueryPoolResults {
        command_buffer: 0x60,
        query_pool: POOL,
        first_query: first,
        query_count: count,
        dst_buffer: DST,
        dst_offset: 0,
        stride: 8,
        flags,
    })
}

/// Waits on the device for idle so that command buffer 0x60 may be recorded again.
fn idle(v: &mut Validator, seq: &mut u64) {
    let w = Call::vkQueueWaitIdle(p::vkQueueWaitIdle { queue: QUEUE });
    ok(v, &w, *seq);
    *seq += 1;
}

const WAIT: u32 = 0x2;

#[test]
fn copy_with_wait_of_a_query_nothing_writes_is_refused() {
    let (mut v, mut seq) = objects();
    // Reset, then a copy of queries 0..2 with WAIT while only query 0 was written.
    let submit = record(&mut v, &mut seq, &[reset(), timestamp(0), copy(0, 2, WAIT)]);
    let e = v.before(&submit, 0).unwrap_err();
    assert!(
        e.contains("copies query 1 of pool 0x90 with VK_QUERY_RESULT_WAIT_BIT")
            && e.contains("wait for it for ever"),
        "{e}"
    );
    // Without WAIT the copy only reads what is there.
    let submit = record(&mut v, &mut seq, &[reset(), timestamp(0), copy(0, 2, 0)]);
    ok(&mut v, &submit, seq);
    seq += 1;
    idle(&mut v, &mut seq);
    // Both written: fine; and a later submission may copy them with WAIT, they stay written.
    let submit = record(
        &mut v,
        &mut seq,
        &[reset(), timestamp(0), timestamp(1), copy(0, 2, WAIT)],
    );
    ok(&mut v, &submit, seq);
    seq += 1;
    idle(&mut v, &mut seq);
    let submit = record(&mut v, &mut seq, &[copy(0, 2, WAIT)]);
    ok(&mut v, &submit, seq);
    seq += 1;
    idle(&mut v, &mut seq);
    // A host reset makes them unavailable again.
    let host = Call::vkResetQueryPool(p::vkResetQueryPool {
        device: DEVICE,
        query_pool: POOL,
        first_query: 1,
        query_count: 1,
    });
    ok(&mut v, &host, seq);
    seq += 1;
    let submit = record(&mut v, &mut seq, &[copy(0, 2, WAIT)]);
    let e = v.before(&submit, 0).unwrap_err();
    assert!(e.contains("copies query 1 of pool 0x90"), "{e}");
}

#[test]
fn wait_for_an_event_nothing_sets_is_refused() {
    let (mut v, mut seq) = objects();
    let wait = |host_stage: bool| {
        Call::vkCmdWaitEvents(p::vkCmdWaitEvents {
            command_buffer: 0x60,
            event_count: 1,
            p_events: Some(vec![EVENT]),
            src_stage_mask: if host_stage { 0x4000 } else { 0x1 },
            dst_stage_mask: 0x1,
            memory_barrier_count: 0,
            p_memory_barriers: None,
            buffer_memory_barrier_count: 0,
            p_buffer_memory_barriers: None,
            image_memory_barrier_count: 0,
            p_image_memory_barriers: None,
        })
    };
    let set = Call::vkCmdSetEvent(p::vkCmdSetEvent {
        command_buffer: 0x60,
        event: EVENT,
        stage_mask: 0x1,
    });
    let submit = record(&mut v, &mut seq, &[wait(false)]);
    let e = v.before(&submit, 0).unwrap_err();
    assert!(
        e.contains(
            "waits for event 0xa0, which neither the host nor a command submitted before sets"
        ),
        "{e}"
    );
    // The host may set it after the submission when the wait names the host stage.
    let submit = record(&mut v, &mut seq, &[wait(true)]);
    ok(&mut v, &submit, seq);
    seq += 1;
    idle(&mut v, &mut seq);
    // Set by a command before the wait: fine.
    let submit = record(&mut v, &mut seq, &[set.clone(), wait(false)]);
    ok(&mut v, &submit, seq);
    seq += 1;
    idle(&mut v, &mut seq);
    // Reset by the host: refused again; set by the host: fine.
    let host = |set: bool| match set {
        true => Call::vkSetEvent(p::vkSetEvent {
            device: DEVICE,
            event: EVENT,
        }),
        false => Call::vkResetEvent(p::vkResetEvent {
            device: DEVICE,
            event: EVENT,
        }),
    };
    ok(&mut v, &host(false), seq);
    seq += 1;
    let submit = record(&mut v, &mut seq, &[wait(false)]);
    assert!(v.before(&submit, 0).is_err());
    ok(&mut v, &host(true), seq);
    seq += 1;
    ok(&mut v, &submit, seq);
}
