//! GPU-side waits the replay could never satisfy (issue 37): refused before the submission
//! reaches the driver, where they would wedge the queue (lavapipe) or the GPU (NVIDIA).

use format::record::Record;
use quarry_tests::hostile::{call_name, find, forged, refused, run, scratch};

/// The demo's first copy with VK_QUERY_RESULT_WAIT_BIT, with its pool's reset moved from
/// before the queries' writes to just before the copy: the copy waits for queries that nothing
/// writes again. The submit of that recording is refused.
#[test]
fn copy_with_wait_of_queries_reset_after_their_writes_is_refused() {
    let dir = scratch();
    let p = forged(&dir, "demo.qtrace", |recs, t| {
        let c = find(recs, t, "vkCmdCopyQueryPoolResults", 0);
        let Ok(vkstream::Call::vkCmdCopyQueryPoolResults(copy)) = (match &recs[c] {
            Record::Call(x) => vkstream::decode_call(
                vkstream::command_id("vkCmdCopyQueryPoolResults").unwrap(),
                &x.params,
            ),
            _ => unreachable!(),
        }) else {
            panic!("not a copy")
        };
        assert_ne!(copy.flags & 0x2, 0, "the demo's first copy waits");
        // The reset of the same pool in the same recording.
        let r = (0..c)
            .rev()
            .find(|&i| match &recs[i] {
                Record::Call(x) if call_name(t, x) == "vkCmdResetQueryPool" => {
                    let d = vkstream::decode_call(
                        vkstream::command_id("vkCmdResetQueryPool").unwrap(),
                        &x.params,
                    );
                    matches!(d, Ok(vkstream::Call::vkCmdResetQueryPool(p))
                        if p.query_pool == copy.query_pool && p.command_buffer == copy.command_buffer)
                }
                _ => false,
            })
            .expect("a reset of the copied pool before the copy");
        let reset = recs.remove(r);
        recs.insert(c - 1, reset);
    });
    let Some((out, took)) = run(&p, &[]) else {
        return;
    };
    refused(
        &out,
        took,
        "vkQueueSubmit",
        "with VK_QUERY_RESULT_WAIT_BIT, but no command submitted before the copy writes it since its reset: the GPU would wait for it for ever",
    );
}
