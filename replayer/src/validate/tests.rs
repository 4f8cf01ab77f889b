//! The checks on hand-made call sequences, without a driver.

use vkstream::types::*;
use vkstream::{params as p, Call};

use super::{Action, Validator};

const INSTANCE: u64 = 0x10;
const GPU: u64 = 0x20;
pub(super) const DEVICE: u64 = 0x30;
pub(super) const QUEUE: u64 = 0x40;

/// A validator that has seen an instance, a physical device, a device and its queue.
pub(super) fn setup() -> (Validator, u64) {
    let mut v = Validator::new();
    let mut seq = 0;
    for c in [
        Call::vkCreateInstance(p::vkCreateInstance {
            p_create_info: Some(Box::default()),
            p_allocator: None,
            p_instance: Some(INSTANCE),
        }),
        Call::vkEnumeratePhysicalDevices(p::vkEnumeratePhysicalDevices {
            instance: INSTANCE,
            p_physical_device_count: Some(1),
            p_physical_devices: Some(vec![GPU]),
        }),
        Call::vkCreateDevice(p::vkCreateDevice {
            physical_device: GPU,
            p_create_info: Some(Box::default()),
            p_allocator: None,
            p_device: Some(DEVICE),
        }),
        Call::vkGetDeviceQueue(p::vkGetDeviceQueue {
            device: DEVICE,
            queue_family_index: 0,
            queue_index: 0,
            p_queue: Some(QUEUE),
        }),
    ] {
        ok(&mut v, &c, seq);
        seq += 1;
    }
    (v, seq)
}

pub(super) fn ok(v: &mut Validator, c: &Call, seq: u64) {
    assert_eq!(v.before(c, 0), Ok(Action::None), "{c:?}");
    v.after(c, 0, seq);
}

fn fence(h: u64, signaled: bool) -> Call {
    Call::vkCreateFence(p::vkCreateFence {
        device: DEVICE,
        p_create_info: Some(Box::new(VkFenceCreateInfo {
            flags: u32::from(signaled),
            ..Default::default()
        })),
        p_allocator: None,
        p_fence: Some(h),
    })
}

fn wait(h: u64) -> Call {
    Call::vkWaitForFences(p::vkWaitForFences {
        device: DEVICE,
        fence_count: 1,
        p_fences: Some(vec![h]),
        wait_all: 1,
        timeout: u64::MAX,
    })
}

#[test]
fn handles_must_be_live_and_of_their_type() {
    let (mut v, seq) = setup();
    let e = v.before(&wait(0x99), 0).unwrap_err();
    assert!(e.contains("fence 0x99 was never created"), "{e}");
    ok(&mut v, &fence(0x99, true), seq);
    ok(&mut v, &wait(0x99), seq + 1);
    let destroy = Call::vkDestroyFence(p::vkDestroyFence {
        device: DEVICE,
        fence: 0x99,
        p_allocator: None,
    });
    ok(&mut v, &destroy, seq + 2);
    let e = v.before(&destroy, 0).unwrap_err();
    assert!(
        e.contains(&format!("was destroyed at call {}", seq + 2)),
        "{e}"
    );
}

#[test]
fn counts_must_agree_with_arrays() {
    let (mut v, _) = setup();
    let mut w = wait(0x99);
    if let Call::vkWaitForFences(p) = &mut w {
        p.fence_count = 3;
    }
    let e = v.before(&w, 0).unwrap_err();
    assert_eq!(e, "fenceCount is 3 but pFences holds 1");
}

#[test]
fn waits_need_a_signal() {
    let (mut v, seq) = setup();
    ok(&mut v, &fence(0x99, false), seq);
    let e = v.before(&wait(0x99), 0).unwrap_err();
    assert!(e.contains("no replayed submission signals"), "{e}");
    // A submission with the fence makes the wait possible, and completes with it.
    let submit = Call::vkQueueSubmit(p::vkQueueSubmit {
        queue: QUEUE,
        submit_count: 0,
        p_submits: Some(vec![]),
        fence: 0x99,
    });
    ok(&mut v, &submit, seq + 1);
    ok(&mut v, &wait(0x99), seq + 2);
    // Submitting with it again before a reset is refused.
    let e = v.before(&submit, 0).unwrap_err();
    assert!(e.contains("not reset"), "{e}");
}

#[test]
fn commands_need_a_recording_command_buffer() {
    let (mut v, seq) = setup();
    command_buffer_0x60(&mut v, seq);
    let draw = Call::vkCmdSetLineWidth(p::vkCmdSetLineWidth {
        command_buffer: 0x60,
        line_width: 1.0,
    });
    let e = v.before(&draw, 0).unwrap_err();
    assert!(e.contains("is not recording (it is initial"), "{e}");
    let begin = Call::vkBeginCommandBuffer(p::vkBeginCommandBuffer {
        command_buffer: 0x60,
        p_begin_info: Some(Box::default()),
    });
    ok(&mut v, &begin, seq + 2);
    ok(&mut v, &draw, seq + 3);
    // Destroying the pool ends its command buffers.
    let destroy = Call::vkDestroyCommandPool(p::vkDestroyCommandPool {
        device: DEVICE,
        command_pool: 0x50,
        p_allocator: None,
    });
    ok(&mut v, &destroy, seq + 4);
    let e = v.before(&draw, 0).unwrap_err();
    assert!(e.contains("command buffer 0x60 was destroyed"), "{e}");
}

#[test]
fn freed_slots_and_reused_handles_are_told_apart() {
    // The object table reuses a destroyed object's slot, and drivers reuse handle values: the
    // lookup cache in front of the table must never answer for an object that is gone.
    let (mut v, mut seq) = setup();
    let destroy = |h| {
        Call::vkDestroyFence(p::vkDestroyFence {
            device: DEVICE,
            fence: h,
            p_allocator: None,
        })
    };
    ok(&mut v, &fence(0x99, true), seq);
    ok(&mut v, &wait(0x99), seq + 1);
    ok(&mut v, &destroy(0x99), seq + 2);
    seq += 3;
    // Another fence takes the freed slot; the old handle stays dead.
    ok(&mut v, &fence(0xa0, true), seq);
    let e = v.before(&wait(0x99), 0).unwrap_err();
    assert!(e.contains("fence 0x99 was destroyed"), "{e}");
    ok(&mut v, &wait(0xa0), seq + 1);
    // The old value handed out again is a new, live fence with its own state (unsignaled).
    ok(&mut v, &fence(0x99, false), seq + 2);
    let e = v.before(&wait(0x99), 0).unwrap_err();
    assert!(e.contains("no replayed submission signals"), "{e}");
    ok(&mut v, &wait(0xa0), seq + 3);
}

#[test]
fn transform_feedback_needs_its_bindings_bound() {
    let (mut v, seq) = setup();
    command_buffer_0x60(&mut v, seq);
    let buffer = Call::vkCreateBuffer(p::vkCreateBuffer {
        device: DEVICE,
        p_create_info: Some(Box::new(VkBufferCreateInfo {
            size: 64,
            usage: 0x800 | 0x1000,
            ..Default::default()
        })),
        p_allocator: None,
        p_buffer: Some(0x70),
    });
    ok(&mut v, &buffer, seq + 2);
    let memory = Call::vkAllocateMemory(p::vkAllocateMemory {
        device: DEVICE,
        p_allocate_info: Some(Box::new(VkMemoryAllocateInfo {
            allocation_size: 64,
            ..Default::default()
        })),
        p_allocator: None,
        p_memory: Some(0x80),
    });
    ok(&mut v, &memory, seq + 3);
    let bind_memory = Call::vkBindBufferMemory(p::vkBindBufferMemory {
        device: DEVICE,
        buffer: 0x70,
        memory: 0x80,
        memory_offset: 0,
    });
    ok(&mut v, &bind_memory, seq + 4);
    let begin_cb = Call::vkBeginCommandBuffer(p::vkBeginCommandBuffer {
        command_buffer: 0x60,
        p_begin_info: Some(Box::default()),
    });
    ok(&mut v, &begin_cb, seq + 5);
    // Bindings 1..+2, with counter buffers or without.
    let begin = |counter: u64| {
        Call::vkCmdBeginTransformFeedbackEXT(p::vkCmdBeginTransformFeedbackEXT {
            command_buffer: 0x60,
            first_counter_buffer: 1,
            counter_buffer_count: 2,
            p_counter_buffers: Some(vec![counter; 2]),
            p_counter_buffer_offsets: Some(vec![0; 2]),
        })
    };
    let end = |counter: u64| {
        Call::vkCmdEndTransformFeedbackEXT(p::vkCmdEndTransformFeedbackEXT {
            command_buffer: 0x60,
            first_counter_buffer: 1,
            counter_buffer_count: 2,
            p_counter_buffers: Some(vec![0, counter]),
            p_counter_buffer_offsets: Some(vec![0; 2]),
        })
    };
    let bind = |first: u32| {
        Call::vkCmdBindTransformFeedbackBuffersEXT(p::vkCmdBindTransformFeedbackBuffersEXT {
            command_buffer: 0x60,
            first_binding: first,
            binding_count: 1,
            p_buffers: Some(vec![0x70]),
            p_offsets: Some(vec![0]),
            p_sizes: None,
        })
    };
    let e = v.before(&begin(0), 0).unwrap_err();
    assert!(
        e.contains("bindings 1..+2, but binding 1 has no transform"),
        "{e}"
    );
    // Ending records binding 2's position, not binding 1's (its counter is VK_NULL_HANDLE).
    ok(&mut v, &bind(1), seq + 6);
    let e = v.before(&end(0x70), 0).unwrap_err();
    assert!(
        e.contains("transform feedback binding 2, which has no buffer"),
        "{e}"
    );
    let e = v.before(&begin(0), 0).unwrap_err();
    assert!(e.contains("but binding 2 has no transform"), "{e}");
    ok(&mut v, &bind(2), seq + 7);
    ok(&mut v, &begin(0x70), seq + 8);
    ok(&mut v, &end(0x70), seq + 9);
    // A new recording starts with nothing bound.
    let end_cb = Call::vkEndCommandBuffer(p::vkEndCommandBuffer {
        command_buffer: 0x60,
    });
    ok(&mut v, &end_cb, seq + 10);
    ok(&mut v, &begin_cb, seq + 11);
    let e = v.before(&begin(0), 0).unwrap_err();
    assert!(e.contains("binding 1 has no transform"), "{e}");
}

/// Command pool 0x50 and its command buffer 0x60, made at `seq` and `seq + 1`.
pub(super) fn command_buffer_0x60(v: &mut Validator, seq: u64) {
    let pool = Call::vkCreateCommandPool(p::vkCreateCommandPool {
        device: DEVICE,
        p_create_info: Some(Box::default()),
        p_allocator: None,
        p_command_pool: Some(0x50),
    });
    ok(v, &pool, seq);
    let alloc = Call::vkAllocateCommandBuffers(p::vkAllocateCommandBuffers {
        device: DEVICE,
        p_allocate_info: Some(Box::new(VkCommandBufferAllocateInfo {
            command_pool: 0x50,
            command_buffer_count: 1,
            ..Default::default()
        })),
        p_command_buffers: Some(vec![0x60]),
    });
    ok(v, &alloc, seq + 1);
}
