//! Hostile traces forged from a real app's trace that the corpus cannot stand in for: piglit's
//! `arb_occlusion_query2-render` on Zink (`tests/fixtures/hostile/`), which pushes its uniform
//! buffers through a descriptor update template (vkCmdPushDescriptorSetWithTemplateKHR). The
//! handles in a template's data are opaque bytes to the generated handle pass; each is checked
//! as a call's own handles are. Each trace ends in one `quarry:` line naming the call.

use format::record::Record;
use quarry_tests::hostile::{
    call_mut, call_name, forged_from, hostile_fixture, refused, run, scratch,
};

/// The uniform buffer both draws read through the pushed template data.
const UNIFORMS: u64 = 0x55d21f251340;

/// The Zink trace with `edit` applied to its records.
fn zink(edit: impl FnOnce(&mut Vec<Record>, &[String])) -> std::path::PathBuf {
    forged_from(
        &scratch(),
        &hostile_fixture("arb_occlusion_query2-render.qtrace"),
        edit,
    )
}

/// Index of the call of `seq`.
fn at_seq(recs: &[Record], seq: u64) -> usize {
    recs.iter()
        .position(|r| matches!(r, Record::Call(c) if c.seq == seq))
        .unwrap()
}

/// The fuzzer's crash (crash-35-0-16): the uniform buffer's vkBindBufferMemory deleted, so the
/// template data pushes a buffer with no memory (VUID-VkWriteDescriptorSet-descriptorType-00329);
/// lavapipe's draw read through it and corrupted its heap (SIGSEGV in malloc, every run).
/// Refused at the push.
#[test]
fn template_push_of_a_buffer_without_memory_is_refused() {
    let p = zink(|recs, t| {
        let bind = at_seq(recs, 384);
        let Record::Call(c) = &recs[bind] else {
            unreachable!()
        };
        assert_eq!(call_name(t, c), "vkBindBufferMemory");
        assert!(c.params.windows(8).any(|w| w == UNIFORMS.to_le_bytes()));
        recs.remove(bind);
    });
    let Some((out, took)) = run(&p, &[]) else {
        return;
    };
    refused(
        &out,
        took,
        "vkCmdPushDescriptorSetWithTemplateKHR",
        "descriptor 0 of template entry 0: buffer 0x55d21f251340 has no memory bound",
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("call 457 "));
}

/// The same template data naming bytes past the end of the uniform buffer (1 MiB), and the
/// buffer destroyed between the recording and its submit (the command buffer is invalid
/// there, VUID-vkQueueSubmit-pCommandBuffers-00070): what the handle pass checks of a call's
/// own handles and descriptor writes, for the template's.
#[test]
fn template_data_outside_its_buffer_or_destroyed_before_submit_is_refused() {
    let p = zink(|recs, _| {
        let i = at_seq(recs, 457);
        let push = &mut call_mut(&mut recs[i]).params;
        // Binding 0's info: the buffer, offset 0, range 64.
        let info: Vec<u8> = [UNIFORMS, 0, 64]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let k = push
            .windows(24)
            .position(|w| w == info)
            .expect("binding 0's buffer info");
        push[k + 8..k + 16].copy_from_slice(&(1u64 << 20).to_le_bytes());
    });
    let Some((out, took)) = run(&p, &[]) else {
        return;
    };
    refused(
        &out,
        took,
        "vkCmdPushDescriptorSetWithTemplateKHR",
        "descriptor 0 of template entry 0: bytes 1048576..+64 of buffer 0x55d21f251340 of \
         1048576 bytes are outside it",
    );

    // The buffer's vkDestroyBuffer (call 513) moved ahead of the submit (486).
    let p = zink(|recs, _| {
        let r = recs.remove(at_seq(recs, 513));
        let i = at_seq(recs, 486);
        recs.insert(i, r);
    });
    let Some((out, took)) = run(&p, &[]) else {
        return;
    };
    refused(
        &out,
        took,
        "vkQueueSubmit",
        "buffer 0x55d21f251340, which its recording uses, was destroyed since",
    );
}

/// The fuzzer's crash (crash-36-1-45, forged from piglit's `ext_timer_query-time-elapsed` on
/// Zink): the image of a vkGetImageMemoryRequirements2 made VK_NULL_HANDLE
/// (VUID-VkImageMemoryRequirementsInfo2-image-parameter); lavapipe read through the null image
/// (SIGSEGV in the call, every run). A required handle in a struct a call reads is checked as a
/// required handle parameter is: refused at the call.
#[test]
fn memory_requirements_of_a_null_image_are_refused() {
    const IMAGE: u64 = 0x55d21ee1c240;
    let p = zink(|recs, t| {
        let i = at_seq(recs, 352);
        let c = call_mut(&mut recs[i]);
        assert_eq!(call_name(t, c), "vkGetImageMemoryRequirements2");
        let k = c
            .params
            .windows(8)
            .position(|w| w == IMAGE.to_le_bytes())
            .expect("the image");
        c.params[k..k + 8].fill(0);
    });
    let Some((out, took)) = run(&p, &[]) else {
        return;
    };
    refused(
        &out,
        took,
        "vkGetImageMemoryRequirements2",
        "VkImageMemoryRequirementsInfo2.image is VK_NULL_HANDLE",
    );
}
