//! Hostile traces around transform feedback: begun, or ended with counters recorded, for bindings
//! the recording never bound a buffer to. lavapipe read the missing binding's target when it
//! recorded the counter at the end and crashed (SIGSEGV, every run). Each forged from the demo
//! (which binds four transform feedback buffers, then begins and ends with no counter buffers)
//! and refused in one `quarry:` line naming the call.

use format::record::Record;
use quarry_tests::hostile::{call_mut, find, forged, refused, run, scratch};
use vkstream::Encoder;

/// The parameters of vkCmdBegin/EndTransformFeedbackEXT on `cb` for bindings `first..+count`,
/// with `counters` (each at offset 0) as pCounterBuffers (VK_NULL_HANDLE: none for that
/// binding), NULL when empty.
fn xfb_params(cb: u64, first: u32, count: u32, counters: &[u64]) -> Vec<u8> {
    let mut e = Encoder::new();
    e.u64(cb);
    e.u32(first);
    e.u32(count);
    let arrays: [&[u64]; 2] = [counters, &vec![0; counters.len()]];
    for a in arrays {
        e.u8(u8::from(!a.is_empty()));
        if !a.is_empty() {
            e.count(a.len());
            a.iter().for_each(|&x| e.u64(x));
        }
    }
    e.into_bytes()
}

/// The demo with its first vkCmdBindTransformFeedbackBuffersEXT deleted, and the
/// vkCmdBeginTransformFeedbackEXT and vkCmdEndTransformFeedbackEXT that followed it made by
/// `begin` and `end` from (command buffer, the deleted bind's first buffer).
fn unbound(
    begin: impl Fn(u64, u64) -> Vec<u8>,
    end: impl Fn(u64, u64) -> Vec<u8>,
) -> std::path::PathBuf {
    forged(&scratch(), "demo.qtrace", |recs, t| {
        let i = find(recs, t, "vkCmdBindTransformFeedbackBuffersEXT", 0);
        let Record::Call(bind) = recs.remove(i) else {
            unreachable!()
        };
        let bind = vkstream::decode_call(bind.cmd, &bind.params).unwrap();
        let vkstream::Call::vkCmdBindTransformFeedbackBuffersEXT(b) = bind else {
            panic!("{bind:?}")
        };
        let (cb, buffer) = (b.command_buffer, b.p_buffers.unwrap()[0]);
        let i = find(recs, t, "vkCmdBeginTransformFeedbackEXT", 0);
        call_mut(&mut recs[i]).params = begin(cb, buffer);
        let i = find(recs, t, "vkCmdEndTransformFeedbackEXT", 0);
        call_mut(&mut recs[i]).params = end(cb, buffer);
    })
}

/// The fuzzer's crash (piglit's arb_transform_feedback_overflow_query-basic on Zink, its
/// vkCmdBindTransformFeedbackBuffersEXT deleted): transform feedback begun for bindings 0..+2
/// (no counter buffers) with none bound (VUID-vkCmdBeginTransformFeedbackEXT-firstCounterBuffer-09630), then ended
/// with counter buffers; lavapipe crashed at the end. Refused at the begin.
#[test]
fn transform_feedback_begun_without_buffers_bound_is_refused() {
    let p = unbound(
        |cb, _| xfb_params(cb, 0, 2, &[0, 0]),
        |cb, buffer| xfb_params(cb, 0, 2, &[buffer, buffer]),
    );
    let Some((out, took)) = run(&p, &[]) else {
        return;
    };
    refused(
        &out,
        took,
        "vkCmdBeginTransformFeedbackEXT",
        "begins transform feedback for bindings 0..+2, but binding 0 has no transform feedback \
         buffer bound",
    );
}

/// Begun for no binding (valid), but ended with a counter buffer for binding 0, which has no
/// buffer whose position it could record: lavapipe crashed the same way. Refused at the end.
#[test]
fn transform_feedback_counter_of_an_unbound_binding_is_refused() {
    let p = unbound(
        |cb, _| xfb_params(cb, 0, 0, &[]),
        |cb, buffer| xfb_params(cb, 0, 1, &[buffer]),
    );
    let Some((out, took)) = run(&p, &[]) else {
        return;
    };
    refused(
        &out,
        took,
        "vkCmdEndTransformFeedbackEXT",
        "would record the position of transform feedback binding 0, which has no buffer bound",
    );
}
