//! Hostile traces whose calls are each well formed but ask the replay GPU for too much: work
//! that does not finish in time, storage beyond the GPU's memory, a host query reset racing the
//! GPU, and a driver quirk; then the classes later fuzz runs found (issue 22): subresources,
//! viewports and views beyond what the GPU or image has, attachments and shader stages used
//! for what they were not made for, command buffers submitted after something they use was
//! destroyed. Each ends in one `quarry:` line naming the call, in bounded time.

use std::time::Duration;

use format::record::Record;
use quarry_tests::hostile::{call_mut, call_name, find, forged, refused, run, scratch};

/// `trace` with its `nth` vkCmdDraw given `instances` instances (the count follows the command
/// buffer and vertexCount).
fn huge_draw(trace: &str, nth: usize, instances: u32) -> std::path::PathBuf {
    forged(&scratch(), trace, |recs, t| {
        let i = find(recs, t, "vkCmdDraw", nth);
        call_mut(&mut recs[i]).params[12..16].copy_from_slice(&instances.to_le_bytes());
    })
}

/// A replay of work that does not finish: one `quarry:` line starting `start` and containing
/// `why`, exit 1 (a failed call, not bad input), and in bounded time: the 10 s wait, 2 s more for
/// the GPU to settle and start-up, not the work's hours.
fn stalled(p: &std::path::Path, start: &str, why: &str) {
    let Some((out, took)) = run(p, &[]) else {
        return;
    };
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("quarry: ")).collect();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].starts_with(start) && lines[0].contains(why),
        "{err}"
    );
    assert!(took < Duration::from_secs(30), "took {took:?}");
}

/// A draw of two billion instances: legal, but lavapipe would draw for hours. The wait after
/// its submit times out; the replay then abandons the device (no idle wait, no destroy) and
/// ends at once with the timeout's error instead of waiting for the draw.
#[test]
fn work_that_does_not_finish_ends_in_bounded_time() {
    let p = huge_draw("demo.qtrace", 0, 2_000_000_000u32);
    stalled(
        &p,
        "quarry: call 276 (vkWaitForFences): ",
        "did not signal within 10 s",
    );
}

/// The fuzzer's hang (seed 0x15): the demo's 40th draw given 2.6 billion instances, then a
/// query read without VK_QUERY_RESULT_WAIT_BIT. lavapipe's read still blocks until the
/// submission running ends; the replay waits (bounded) for the work first and stops there.
#[test]
fn read_while_work_does_not_finish_ends_in_bounded_time() {
    let p = huge_draw("demo.qtrace", 39, 2_625_564_860u32);
    stalled(
        &p,
        "quarry: call 627 (vkGetQueryPoolResults): ",
        "the replay GPU did not finish the work submitted so far within 10 s",
    );
}

/// The fuzzer's hang (seed 0x16): the demo's 24th draw given a huge instance count, then a
/// vkWaitSemaphores for its submission. That call replays with the app's own timeout and an
/// unchecked result, so its time-out went unnoticed and a later read waited for the queue with
/// no limit; the wait is now done first, bounded, and its time-out is the error.
#[test]
fn semaphore_wait_for_work_that_does_not_finish_ends_in_bounded_time() {
    let p = huge_draw("demo.qtrace", 23, 2_000_000_000u32);
    stalled(
        &p,
        "quarry: call 507 (vkWaitSemaphores): ",
        "did not reach their values within 10 s",
    );
}

/// The fuzzer's hang (seed 0x17): vkcube's first draw given 2^30 instances. Its present (an
/// empty submission waiting on the frame's semaphore) blocked in lavapipe's vkQueueSubmit until
/// the draw ended; on lavapipe a submission that waits on semaphores now waits (bounded) for
/// outstanding work first.
#[test]
fn present_after_work_that_does_not_finish_ends_in_bounded_time() {
    let p = huge_draw("vkcube.qtrace", 0, 1u32 << 30);
    stalled(
        &p,
        "quarry: call 146 (vkQueuePresentKHR): ",
        "the replay GPU did not finish the work submitted so far within 10 s",
    );
}

/// A query pool of 3.4 billion queries: refused before the driver allocates its results.
#[test]
fn query_pool_larger_than_the_gpu_is_refused() {
    let dir = scratch();
    let p = forged(&dir, "demo.qtrace", |recs, t| {
        let i = find(recs, t, "vkCreateQueryPool", 0);
        let c = call_mut(&mut recs[i]);
        // flags, queryType (occlusion), queryCount 4, pipelineStatistics.
        let o = at(&c.params, &words(&[0, 0, 4, 0])) + 8;
        c.params[o..o + 4].copy_from_slice(&3_400_000_000u32.to_le_bytes());
    });
    let Some((out, took)) = run(&p, &[]) else {
        return;
    };
    refused(
        &out,
        took,
        "vkCreateQueryPool",
        "a query pool of 3400000000 queries needs at least 54400000000 bytes of results, more than the replay GPU's largest memory heap",
    );
}

/// The fuzzer's crash (seed 0x18): vkcube's texture given 8192 mip levels (256x256 has 9).
/// lavapipe corrupted the heap making it, and `--memory auto` makes the trace's images ahead
/// of their calls (to ask their requirements): refused before, with both memory modes.
#[test]
fn image_with_more_mip_levels_than_its_size_is_refused() {
    let dir = scratch();
    let p = forged(&dir, "vkcube.qtrace", |recs, t| {
        let i = find(recs, t, "vkCreateImage", 1);
        let c = call_mut(&mut recs[i]);
        // extent 256x256x1, then mipLevels.
        let o = at(&c.params, &words(&[256, 256, 1, 1])) + 12;
        c.params[o..o + 4].copy_from_slice(&8192u32.to_le_bytes());
    });
    for memory in ["auto", "remap"] {
        let Some((out, took)) = run(&p, &["--memory", memory]) else {
            return;
        };
        refused(
            &out,
            took,
            "vkCreateImage",
            "call 53 (vkCreateImage): mipLevels is 8192, but an image of 256x256x1 has 1 to 9",
        );
    }
}

/// The fuzzer's crash (seed 0x1a): a frame's pipeline bind moved after the occlusion query
/// begun behind it (vertex buffers bound before): lavapipe's queue thread crashed. Valid usage
/// as far as the specification says, so refused on lavapipe only, as its quirk.
#[test]
fn query_begun_before_any_pipeline_is_a_lavapipe_quirk() {
    let dir = scratch();
    let p = forged(&dir, "demo.qtrace", |recs, _| {
        let at_seq = |recs: &Vec<Record>, seq: u64| {
            recs.iter()
                .position(|r| matches!(r, Record::Call(c) if c.seq == seq))
                .unwrap()
        };
        let r = recs.remove(at_seq(recs, 419));
        let i = at_seq(recs, 423);
        recs.insert(i + 1, r);
    });
    let Some((out, took)) = run(&p, &[]) else {
        return;
    };
    refused(
        &out,
        took,
        "vkCmdBeginQuery",
        "call 423 (vkCmdBeginQuery): begins query 0 of pool 0x562061288ab0 inside a render pass instance before any graphics pipeline is bound: a lavapipe quirk",
    );
}

/// A host query reset moved between the submit that writes the query and the fence wait that
/// shows it done: invalid usage, refused (it raced the GPU and cost a 10 s wait at the read).
#[test]
fn host_reset_of_queries_pending_work_uses_is_refused() {
    let dir = scratch();
    let p = forged(&dir, "demo.qtrace", |recs, t| {
        // The second host reset (after frame 2's fence wait) moved before that wait.
        let i = find(recs, t, "vkResetQueryPool", 1);
        let w = (0..i)
            .rev()
            .find(|j| matches!(&recs[*j], Record::Call(c) if call_name(t, c) == "vkWaitForFences"))
            .unwrap();
        let r = recs.remove(i);
        recs.insert(w, r);
    });
    let Some((out, took)) = run(&p, &[]) else {
        return;
    };
    refused(
        &out,
        took,
        "vkResetQueryPool",
        "resets queries 0..+1 of query pool 0x5620612af6b0 while the submission of call 305 may still use queries 0..1 of it",
    );
}

/// The `nth` call named `name`, decoded.
fn decoded(recs: &[Record], table: &[String], name: &str, nth: usize) -> vkstream::Call {
    let Record::Call(c) = &recs[find(recs, table, name, nth)] else {
        unreachable!()
    };
    vkstream::decode_call(vkstream::command_id(name).unwrap(), &c.params).unwrap()
}

/// Offset of the first occurrence of `needle` in `hay`.
fn at(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len())
        .position(|w| w == needle)
        .expect("pattern in the parameters")
}

/// The bytes of `words` (u32s) in a row.
fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The fuzzer's crash (seed 0x1b): the demo's transform feedback buffer swapped for its vertex
/// buffer, which was not made for transform feedback and is smaller than the range bound; lavapipe
/// wrote past it. Refused at the bind.
#[test]
fn transform_feedback_binding_of_another_buffer_is_refused() {
    let dir = scratch();
    let p = forged(&dir, "demo.qtrace", |recs, t| {
        let handle_of = |recs: &[Record], name: &str| match decoded(recs, t, name, 0) {
            vkstream::Call::vkCmdBindTransformFeedbackBuffersEXT(p) => p.p_buffers.unwrap()[0],
            vkstream::Call::vkCmdBindVertexBuffers(p) => p.p_buffers.unwrap()[0],
            other => panic!("{other:?}"),
        };
        let xfb = handle_of(recs, "vkCmdBindTransformFeedbackBuffersEXT");
        let vertex = handle_of(recs, "vkCmdBindVertexBuffers");
        assert_ne!(xfb, vertex);
        let i = find(recs, t, "vkCmdBindTransformFeedbackBuffersEXT", 0);
        let params = &mut call_mut(&mut recs[i]).params;
        let k = at(params, &xfb.to_le_bytes());
        params[k..k + 8].copy_from_slice(&vertex.to_le_bytes());
    });
    let Some((out, took)) = run(&p, &[]) else {
        return;
    };
    refused(
        &out,
        took,
        "vkCmdBindTransformFeedbackBuffersEXT",
        "was not created with VK_BUFFER_USAGE_TRANSFORM_FEEDBACK_BUFFER_BIT_EXT",
    );
}

/// The fuzzer's crash (seed 0x1b): vkcube's first acquire duplicated, so its semaphore is
/// signaled twice before the present waits on it once; lavapipe crashed at its destruction
/// (one time in three). Refused at the second acquire.
#[test]
fn acquire_of_a_signaled_semaphore_is_refused() {
    let dir = scratch();
    let p = forged(&dir, "vkcube.qtrace", |recs, t| {
        let i = find(recs, t, "vkAcquireNextImageKHR", 0);
        let again = recs[i].clone();
        recs.insert(i + 1, again);
    });
    let Some((out, took)) = run(&p, &[]) else {
        return;
    };
    refused(
        &out,
        took,
        "vkAcquireNextImageKHR",
        "is already signaled and nothing has waited on it since",
    );
}

/// The fuzzer's other crash of seed 0x1b: vkcube's last acquire duplicated after the teardown's
/// idle wait, so a semaphore is signaled by an acquire nothing waits for and then destroyed; lavapipe crashed (one time in
/// three) freeing it under the emulated acquire's signal. The replay now waits for the device
/// first: no crash, and the validation layer has nothing to say.
#[test]
fn semaphore_destroyed_while_an_acquire_signals_it_waits_first() {
    let dir = scratch();
    let p = forged(&dir, "vkcube.qtrace", |recs, t| {
        let n = recs
            .iter()
            .filter(|r| matches!(r, Record::Call(c) if call_name(t, c) == "vkAcquireNextImageKHR"))
            .count();
        let i = find(recs, t, "vkAcquireNextImageKHR", n - 1);
        // After the teardown's idle wait, just before the semaphores are destroyed.
        let d = find(recs, t, "vkDestroySemaphore", 0);
        let again = recs[i].clone();
        recs.insert(d, again);
    });
    let Some((out, _)) = run(&p, &["--validate"]) else {
        return;
    };
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("validation: 0 messages"), "{text}");
}

/// The fuzzer's crash (seed 0x5eed, 300 s): vkcube's depth image destroy made to name a
/// swapchain image; the driver freed it again with its swapchain (a double free at teardown).
/// Refused at the destroy.
#[test]
fn destroy_of_a_swapchain_image_is_refused() {
    let dir = scratch();
    let p = forged(&dir, "vkcube.qtrace", |recs, t| {
        let vkstream::Call::vkGetSwapchainImagesKHR(g) =
            decoded(recs, t, "vkGetSwapchainImagesKHR", 1)
        else {
            unreachable!()
        };
        let image = g.p_swapchain_images.unwrap()[0];
        let d = find(recs, t, "vkDestroyImage", 0);
        let params = &mut call_mut(&mut recs[d]).params;
        // device, then the image.
        params[8..16].copy_from_slice(&image.to_le_bytes());
    });
    let Some((out, took)) = run(&p, &[]) else {
        return;
    };
    refused(
        &out,
        took,
        "vkDestroyImage",
        "which destroys it; it must not be destroyed by vkDestroyImage",
    );
}

/// vkcube's vkGetImageSubresourceLayout with word `k` of its subresource (aspectMask,
/// mipLevel, arrayLayer) set to `value`.
fn subresource_layout(k: usize, value: u32) -> std::path::PathBuf {
    forged(&scratch(), "vkcube.qtrace", |recs, t| {
        let vkstream::Call::vkGetImageSubresourceLayout(g) =
            decoded(recs, t, "vkGetImageSubresourceLayout", 0)
        else {
            unreachable!()
        };
        let s = g.p_subresource.unwrap();
        let mut w = [s.aspect_mask, s.mip_level, s.array_layer];
        let i = find(recs, t, "vkGetImageSubresourceLayout", 0);
        let params = &mut call_mut(&mut recs[i]).params;
        let o = at(params, &words(&w));
        w[k] = value;
        params[o..o + 12].copy_from_slice(&words(&w));
    })
}

/// The fuzzer's crash (seed 0x1e): vkcube's texture layout query given mip level 6483909 (the
/// image has 1); lavapipe indexed its levels with it (SIGSEGV). Refused
/// (VUID-vkGetImageSubresourceLayout-mipLevel-01716), as are a layer outside the image and an
/// aspect mask of two aspects, or of one the format lacks.
#[test]
fn layout_query_of_a_subresource_outside_its_image_is_refused() {
    let cases = [
        (1, 6_483_909, "mip level 6483909 is outside image 0x"),
        (2, 7, "array layer 7 is outside image 0x"),
        (0, 0x3, "aspect mask 0x3 must name exactly one aspect"),
        (0, 0x2, "aspect mask 0x2 does not fit image 0x"),
    ];
    for (k, value, why) in cases {
        let p = subresource_layout(k, value);
        let Some((out, took)) = run(&p, &[]) else {
            return;
        };
        refused(&out, took, "vkGetImageSubresourceLayout", why);
    }
}

/// Found beside the fuzzer's crashes: vkcube's first vkCmdSetViewport (and vkCmdSetScissor)
/// given a first viewport of 2^30; lavapipe wrote it into its fixed array of 16 (SIGSEGV).
/// Refused (VUID-vkCmdSetViewport-firstViewport-01223, vkCmdSetScissor-firstScissor-00592).
#[test]
fn viewports_beyond_the_gpu_are_refused() {
    for (name, what) in [
        ("vkCmdSetViewport", "viewports"),
        ("vkCmdSetScissor", "scissors"),
    ] {
        let p = forged(&scratch(), "vkcube.qtrace", |recs, t| {
            let i = find(recs, t, name, 0);
            // commandBuffer, then firstViewport (firstScissor).
            call_mut(&mut recs[i]).params[8..12].copy_from_slice(&(1u32 << 30).to_le_bytes());
        });
        let Some((out, took)) = run(&p, &[]) else {
            return;
        };
        refused(
            &out,
            took,
            name,
            &format!("{what} 1073741824..+1 exceed the replay GPU's maxViewports 16"),
        );
    }
}

/// The demo's first vkCmdBeginRendering, decoded, with the params' offset of its
/// (layerCount, viewMask) words.
fn rendering(recs: &[Record], t: &[String]) -> (usize, vkstream::types::VkRenderingInfo) {
    let vkstream::Call::vkCmdBeginRendering(b) = decoded(recs, t, "vkCmdBeginRendering", 0) else {
        unreachable!()
    };
    let r = *b.p_rendering_info.unwrap();
    let e = &r.render_area.extent;
    let Record::Call(c) = &recs[find(recs, t, "vkCmdBeginRendering", 0)] else {
        unreachable!()
    };
    // extent, then layerCount and viewMask.
    let o = at(
        &c.params,
        &words(&[e.width, e.height, r.layer_count, r.view_mask]),
    ) + 8;
    (o, r)
}

/// The fuzzer's crash (seed 0x20): a demo render pass instance given view mask 0xe15b; lavapipe
/// rendered view 15 to attachments of one layer (SIGSEGV). Refused beyond the GPU's views
/// (VUID-VkRenderingInfo-viewMask-06128), and beyond the attachments' layers.
#[test]
fn view_mask_beyond_the_gpu_or_the_attachments_is_refused() {
    for (mask, why) in [
        (
            0x4000u32,
            "view mask 0x4000 names view 14, but the replay GPU's maxMultiviewViewCount is 6",
        ),
        (0x2, "renders 2 layers to image view 0x"),
    ] {
        let p = forged(&scratch(), "demo.qtrace", |recs, t| {
            let (o, _) = rendering(recs, t);
            let i = find(recs, t, "vkCmdBeginRendering", 0);
            call_mut(&mut recs[i]).params[o + 4..o + 8].copy_from_slice(&mask.to_le_bytes());
            assert_eq!(rendering(recs, t).1.view_mask, mask);
        });
        let Some((out, took)) = run(&p, &[]) else {
            return;
        };
        refused(&out, took, "vkCmdBeginRendering", why);
    }
}

/// The fuzzer's crash (seed 0x20): a demo render pass instance whose color attachment is its
/// depth attachment's view (D16, an image made for depth only); lavapipe crashed drawing to it.
/// Refused (VUID-VkRenderingInfo-colorAttachmentCount-06087).
#[test]
fn depth_view_as_color_attachment_is_refused() {
    let p = forged(&scratch(), "demo.qtrace", |recs, t| {
        let (_, r) = rendering(recs, t);
        let color = r.p_color_attachments.unwrap()[0].image_view;
        let depth = r.p_depth_attachment.unwrap().image_view;
        let i = find(recs, t, "vkCmdBeginRendering", 0);
        let params = &mut call_mut(&mut recs[i]).params;
        let k = at(params, &color.to_le_bytes());
        params[k..k + 8].copy_from_slice(&depth.to_le_bytes());
    });
    let Some((out, took)) = run(&p, &[]) else {
        return;
    };
    refused(
        &out,
        took,
        "vkCmdBeginRendering",
        "color attachment 0: image view 0x",
    );
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("which was not created with VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT"));
}

/// The fuzzer's crash (seed 0x33): the depth view of a demo render pass instance of 4 samples
/// (call 718, color and depth 4x) swapped for the 1-sample depth view of its first; lavapipe
/// rendered 4 samples into the 1-sample image, writing past it (SIGSEGV or heap corruption in
/// its queue thread). Refused at the begin
/// (VUID-VkRenderingInfo-multisampledRenderToSingleSampled-06857).
#[test]
fn attachments_of_different_sample_counts_are_refused() {
    let p = forged(&scratch(), "demo.qtrace", |recs, t| {
        let depth_1x = rendering(recs, t).1.p_depth_attachment.unwrap().image_view;
        let i = recs
            .iter()
            .position(|r| matches!(r, Record::Call(c) if c.seq == 718))
            .unwrap();
        let Record::Call(c) = &recs[i] else {
            unreachable!()
        };
        let vkstream::Call::vkCmdBeginRendering(b) = vkstream::decode_call(
            vkstream::command_id("vkCmdBeginRendering").unwrap(),
            &c.params,
        )
        .unwrap() else {
            panic!("call 718 is not vkCmdBeginRendering")
        };
        let depth_4x = b
            .p_rendering_info
            .unwrap()
            .p_depth_attachment
            .unwrap()
            .image_view;
        let params = &mut call_mut(&mut recs[i]).params;
        let k = at(params, &depth_4x.to_le_bytes());
        params[k..k + 8].copy_from_slice(&depth_1x.to_le_bytes());
    });
    let Some((out, took)) = run(&p, &[]) else {
        return;
    };
    refused(
        &out,
        took,
        "vkCmdBeginRendering",
        "depth attachment: image view 0x562060c56bb0 has sample count 1, but color attachment 0 \
         (image view 0x562061290d30) has sample count 4",
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("quarry: call 718 (vkCmdBeginRendering)"));
}

/// The fuzzer's crash (seed 0x20): the demo's teardown destroy of a query pool moved between
/// the recording of the last frame's command buffer, which uses it, and its submit; lavapipe's
/// queue thread then used the freed pool (heap corruption). The command buffer is invalid
/// there, and so it is when a buffer it uses, or that buffer's memory, is gone: refused at
/// the submit (VUID-vkQueueSubmit2-commandBuffer-03874..).
#[test]
fn submit_of_a_command_buffer_whose_objects_are_gone_is_refused() {
    // (seq of the teardown call, what the error says it ended)
    for (seq, why) in [
        (
            1188,
            "query pool 0x562061288ab0, which its recording uses, was destroyed since",
        ),
        (
            1191,
            "buffer 0x562061484730, which its recording uses, was destroyed since",
        ),
        (
            1192,
            "buffer 0x562061484730 is bound to memory 0x5620614849b0, which was freed",
        ),
    ] {
        let p = forged(&scratch(), "demo.qtrace", |recs, _| {
            let at_seq = |recs: &Vec<Record>, seq: u64| {
                recs.iter()
                    .position(|r| matches!(r, Record::Call(c) if c.seq == seq))
                    .unwrap()
            };
            // Before the barrier after the recording's last copy (1180), ahead of the submit.
            let r = recs.remove(at_seq(recs, seq));
            let i = at_seq(recs, 1181);
            recs.insert(i, r);
        });
        let Some((out, took)) = run(&p, &[]) else {
            return;
        };
        refused(&out, took, "vkQueueSubmit2", why);
        assert!(String::from_utf8_lossy(&out.stderr)
            .contains("call 1183 (vkQueueSubmit2): command buffer 0x562061494070 is invalid"));
    }
}

/// The demo's first vkCreateGraphicsPipelines with its fragment stage's `stage` (when `stage`)
/// or its rasterizationSamples set to `value`; and the edited value, decoded again.
fn pipeline_edit(stage: bool, value: u32) -> (std::path::PathBuf, String) {
    let mut shown = String::new();
    let p = forged(&scratch(), "demo.qtrace", |recs, t| {
        let vkstream::Call::vkCreateGraphicsPipelines(g) =
            decoded(recs, t, "vkCreateGraphicsPipelines", 0)
        else {
            unreachable!()
        };
        let ci = &g.p_create_infos.unwrap()[0];
        let fragment = &ci.p_stages.as_ref().unwrap()[1];
        assert_eq!(fragment.stage, 0x10);
        let i = find(recs, t, "vkCreateGraphicsPipelines", 0);
        let params = &mut call_mut(&mut recs[i]).params;
        let o = if stage {
            // flags, stage, then the module.
            let mut w = words(&[fragment.flags, fragment.stage]);
            w.extend(fragment.module.to_le_bytes());
            at(params, &w) + 4
        } else {
            // Where this trace's rasterizationSamples lies (the decoded edit below checks it).
            342
        };
        params[o..o + 4].copy_from_slice(&value.to_le_bytes());
        let vkstream::Call::vkCreateGraphicsPipelines(g) =
            decoded(recs, t, "vkCreateGraphicsPipelines", 0)
        else {
            unreachable!()
        };
        let ci = &g.p_create_infos.unwrap()[0];
        shown = if stage {
            format!("stage {}", ci.p_stages.as_ref().unwrap()[1].stage)
        } else {
            format!(
                "samples {}",
                ci.p_multisample_state
                    .as_ref()
                    .unwrap()
                    .rasterization_samples
            )
        };
    });
    (p, shown)
}

/// Found by a probe of every parameter word beside the fuzz runs: the demo's first pipeline
/// with its fragment stage given as another (lavapipe compiled the fragment shader as that
/// stage, or as a second vertex shader, and crashed), and with rasterizationSamples 16384.
/// Refused (VUID-VkPipelineShaderStageCreateInfo-pName-00707,
/// VkGraphicsPipelineCreateInfo-stage-06896/06897, and the sample count's valid values).
#[test]
fn pipeline_stages_and_samples_that_do_not_fit_are_refused() {
    for (stage, value, why) in [
        (
            true,
            0x8,
            "stage 0x8 names entry point \"main\" of shader module 0x",
        ),
        (true, 0x1, "stage 0x1 is given twice"),
        (true, 0x20, "stage 0x20 is not one graphics shader stage"),
        (
            true,
            0x40_0000,
            "stage 0x400000 is not one graphics shader stage",
        ),
        (
            false,
            16384,
            "rasterizationSamples 16384 is not a sample count",
        ),
    ] {
        let (p, shown) = pipeline_edit(stage, value);
        let want = if stage { "stage" } else { "samples" };
        assert_eq!(shown, format!("{want} {value}"));
        let Some((out, took)) = run(&p, &[]) else {
            return;
        };
        refused(&out, took, "vkCreateGraphicsPipelines", why);
    }
}

/// The fuzzer's crash (seed 0x22): vkcube's render pass with subpassCount 0 (its one subpass
/// still in the array); lavapipe crashed making it. Refused
/// (VUID-VkRenderPassCreateInfo-subpassCount-arraylength).
#[test]
fn render_pass_without_subpasses_is_refused() {
    let p = forged(&scratch(), "vkcube.qtrace", |recs, t| {
        let vkstream::Call::vkCreateRenderPass(r) = decoded(recs, t, "vkCreateRenderPass", 0)
        else {
            unreachable!()
        };
        let ci = r.p_create_info.unwrap();
        assert_eq!(ci.subpass_count, 1);
        let i = find(recs, t, "vkCreateRenderPass", 0);
        let params = &mut call_mut(&mut recs[i]).params;
        // subpassCount, then the array's flag 1 and its length 1.
        let mut w = words(&[1]);
        w.push(1);
        w.extend(1u64.to_le_bytes());
        let k = at(params, &w);
        params[k..k + 4].copy_from_slice(&0u32.to_le_bytes());
        let vkstream::Call::vkCreateRenderPass(r) = decoded(recs, t, "vkCreateRenderPass", 0)
        else {
            unreachable!()
        };
        assert_eq!(r.p_create_info.unwrap().subpass_count, 0);
    });
    let Some((out, took)) = run(&p, &[]) else {
        return;
    };
    refused(
        &out,
        took,
        "vkCreateRenderPass",
        "subpassCount is 0: a render pass has at least one subpass",
    );
}

/// vkcube's first vkCreateGraphicsPipelines with `edit` applied to its parameters (given the
/// decoded create info); the call decoded again.
fn cube_pipeline(
    edit: impl FnOnce(&mut Vec<u8>, &vkstream::types::VkGraphicsPipelineCreateInfo),
) -> (
    std::path::PathBuf,
    vkstream::types::VkGraphicsPipelineCreateInfo,
) {
    let mut after = None;
    let p = forged(&scratch(), "vkcube.qtrace", |recs, t| {
        let info = |recs: &[Record]| {
            let vkstream::Call::vkCreateGraphicsPipelines(g) =
                decoded(recs, t, "vkCreateGraphicsPipelines", 0)
            else {
                unreachable!()
            };
            g.p_create_infos.unwrap().remove(0)
        };
        let ci = info(recs);
        let i = find(recs, t, "vkCreateGraphicsPipelines", 0);
        edit(&mut call_mut(&mut recs[i]).params, &ci);
        after = Some(info(recs));
    });
    (p, after.unwrap())
}

/// Found by the parameter probe: vkcube's pipeline with a dynamic state of 4194304, or made for
/// subpass 4194304 of a render pass with one; lavapipe indexed its tables with them and
/// crashed. Refused (VUID-VkPipelineDynamicStateCreateInfo-pDynamicStates-parameter,
/// VkGraphicsPipelineCreateInfo-renderPass-06046).
#[test]
fn pipeline_dynamic_states_and_subpasses_that_do_not_exist_are_refused() {
    let (p, ci) = cube_pipeline(|params, ci| {
        let states = ci.p_dynamic_state.as_ref().unwrap();
        let have = states.p_dynamic_states.as_ref().unwrap();
        // dynamicStateCount, the array's flag 1 and length, then the states.
        let n = have.len() as u32;
        let mut w = words(&[n]);
        w.push(1);
        w.extend(u64::from(n).to_le_bytes());
        w.extend(words(&have.iter().map(|&d| d as u32).collect::<Vec<_>>()));
        let k = at(params, &w) + 13;
        params[k..k + 4].copy_from_slice(&4_194_304u32.to_le_bytes());
    });
    let states = ci.p_dynamic_state.unwrap().p_dynamic_states.unwrap();
    assert_eq!(states[0], 4_194_304);
    let Some((out, took)) = run(&p, &[]) else {
        return;
    };
    refused(
        &out,
        took,
        "vkCreateGraphicsPipelines",
        "VkPipelineDynamicStateCreateInfo.pDynamicStates is 4194304, which is not a VkDynamicState value",
    );
    let (p, ci) = cube_pipeline(|params, ci| {
        let k = at(params, &ci.render_pass.to_le_bytes()) + 8;
        params[k..k + 4].copy_from_slice(&4_194_304u32.to_le_bytes());
    });
    assert_eq!(ci.subpass, 4_194_304);
    let Some((out, took)) = run(&p, &[]) else {
        return;
    };
    refused(
        &out,
        took,
        "vkCreateGraphicsPipelines",
        "subpass 4194304 is not one of render pass 0x",
    );
}

/// Found by the parameter probe: vkcube's descriptor set layout binding with descriptor type,
/// or stage flags, 2^30; lavapipe crashed (SIGBUS) on either. Refused
/// (VUID-VkDescriptorSetLayoutBinding-descriptorType-parameter, -descriptorCount-00283).
#[test]
fn descriptor_bindings_of_unknown_types_or_stages_are_refused() {
    for (field, why) in [
        (0, "VkDescriptorSetLayoutBinding.descriptorType is 1073741824, which is not a VkDescriptorType value"),
        (2, "has stage flags 0x40000000, not shader stages"),
    ] {
        let p = forged(&scratch(), "vkcube.qtrace", |recs, t| {
            let vkstream::Call::vkCreateDescriptorSetLayout(l) =
                decoded(recs, t, "vkCreateDescriptorSetLayout", 0)
            else {
                unreachable!()
            };
            let b = &l.p_create_info.unwrap().p_bindings.unwrap()[0];
            let i = find(recs, t, "vkCreateDescriptorSetLayout", 0);
            let params = &mut call_mut(&mut recs[i]).params;
            // binding, descriptorType, descriptorCount, stageFlags.
            let w = [
                b.binding,
                b.descriptor_type as u32,
                b.descriptor_count,
                b.stage_flags,
            ];
            let k = at(params, &words(&w)) + 4 + 4 * field;
            params[k..k + 4].copy_from_slice(&(1u32 << 30).to_le_bytes());
        });
        let Some((out, took)) = run(&p, &[]) else {
            return;
        };
        refused(&out, took, "vkCreateDescriptorSetLayout", why);
    }
}

/// The fuzzer's crash (seed 0x24): a demo shader's OpName made to name id 524319 (the module's
/// bound is 84); lavapipe's SPIR-V reader crashed on it. Refused at vkCreateShaderModule
/// (VUID-VkShaderModuleCreateInfo-pCode-08737, as far as can be told without the grammar).
#[test]
fn shader_naming_an_id_beyond_its_bound_is_refused() {
    let p = forged(&scratch(), "demo.qtrace", |recs, _| {
        let i = recs
            .iter()
            .position(|r| matches!(r, Record::Call(c) if c.seq == 46))
            .unwrap();
        let params = &mut call_mut(&mut recs[i]).params;
        // OpName %31 "i".
        let k = at(params, &words(&[0x3_0005, 0x1f, 0x69]));
        params[k + 4..k + 8].copy_from_slice(&0x8_001fu32.to_le_bytes());
    });
    let Some((out, took)) = run(&p, &[]) else {
        return;
    };
    refused(
        &out,
        took,
        "vkCreateShaderModule",
        "its SPIR-V instruction at word 134 targets id 524319, outside the module's bound 84",
    );
}

/// The fuzzer's last open crash class (seed 0x23): vkcube's first vkAllocateDescriptorSets
/// duplicated after the update that writes its set. The copy hands out the same handle again,
/// so the replay bound a fresh, never written set and lavapipe read garbage descriptors in its
/// queue thread (SIGSEGV). No driver hands out a live handle: refused at the copy.
#[test]
fn creation_of_a_handle_still_live_is_refused() {
    let p = forged(&scratch(), "vkcube.qtrace", |recs, t| {
        let a = find(recs, t, "vkAllocateDescriptorSets", 0);
        let u = find(recs, t, "vkUpdateDescriptorSets", 0);
        assert!(u > a);
        let copy = recs[a].clone();
        recs.insert(u + 1, copy);
    });
    let Some((out, took)) = run(&p, &[]) else {
        return;
    };
    refused(
        &out,
        took,
        "vkAllocateDescriptorSets",
        "descriptor set 0x558d87359fb0 is created again while it is live",
    );
}

/// Fuzzing against the H100 (`fuzz_replay --gpu NVIDIA`, seed 0x31) found two classes that
/// lavapipe refused late but NVIDIA's driver crashed on (SIGSEGV, no output): an image view whose
/// component swizzle is no VkComponentSwizzle value, and a graphics pipeline bound at the compute
/// bind point. Both are refused at the call now, before any driver sees them.
#[test]
fn undefined_enum_values_are_refused() {
    let p = forged(&scratch(), "demo.qtrace", |recs, t| {
        let vkstream::Call::vkCreateImageView(v) = decoded(recs, t, "vkCreateImageView", 0) else {
            unreachable!()
        };
        let ci = v.p_create_info.unwrap();
        // image, viewType, format, then the four swizzles.
        let mut key = ci.image.to_le_bytes().to_vec();
        key.extend(words(&[ci.view_type as u32, ci.format as u32]));
        let i = find(recs, t, "vkCreateImageView", 0);
        let params = &mut call_mut(&mut recs[i]).params;
        let g = at(params, &key) + key.len() + 4;
        params[g..g + 4].copy_from_slice(&524_288u32.to_le_bytes());
    });
    let Some((out, took)) = run(&p, &[]) else {
        return;
    };
    refused(
        &out,
        took,
        "vkCreateImageView",
        "VkComponentMapping.g is 524288, which is not a VkComponentSwizzle value",
    );
}

#[test]
fn pipeline_bound_at_the_bind_point_of_another_kind_is_refused() {
    let p = forged(&scratch(), "vkcube.qtrace", |recs, t| {
        let i = find(recs, t, "vkCmdBindPipeline", 0);
        // commandBuffer, then pipelineBindPoint: GRAPHICS -> COMPUTE.
        call_mut(&mut recs[i]).params[8..12].copy_from_slice(&1u32.to_le_bytes());
    });
    let Some((out, took)) = run(&p, &[]) else {
        return;
    };
    refused(
        &out,
        took,
        "vkCmdBindPipeline",
        "bound at pipeline bind point 1 (a graphics pipeline binds at 0)",
    );
}

/// The H100 fuzz run's third crash (seed 0x31): a shader word edited to an id the module never
/// defines. lavapipe failed the pipeline cleanly, NVIDIA's compiler crashed; the structural check
/// reads no grammar. With SPIRV-Tools linked (`replayer/build.rs`; `scripts/deps.sh` installs it)
/// the module is refused at its creation.
#[test]
fn spirv_naming_an_undefined_id_is_refused() {
    if !replayer::validate::spirv::AVAILABLE {
        eprintln!("SKIP: this build has no SPIRV-Tools (install spirv-tools and rebuild)");
        return;
    }
    let p = forged(&scratch(), "vkcube.qtrace", |recs, t| {
        let vkstream::Call::vkCreateShaderModule(m) = decoded(recs, t, "vkCreateShaderModule", 0)
        else {
            unreachable!()
        };
        let code = m.p_create_info.unwrap().p_code.unwrap();
        // The first OpFunction (opcode 54): its result type becomes an id never defined.
        let mut i = 5;
        while code[i] & 0xffff != 54 {
            i += (code[i] >> 16) as usize;
        }
        let k = find(recs, t, "vkCreateShaderModule", 0);
        let params = &mut call_mut(&mut recs[k]).params;
        let start = at(params, &words(&code[..8]));
        let w = start + 4 * (i + 1);
        params[w..w + 4].copy_from_slice(&0x7fff_0000u32.to_le_bytes());
    });
    let Some((out, took)) = run(&p, &[]) else {
        return;
    };
    refused(
        &out,
        took,
        "vkCreateShaderModule",
        "its SPIR-V does not validate",
    );
}

/// A replay whose shader modules reach the driver unvalidated says so (the check turned off here;
/// a build without SPIRV-Tools says the same, with its reason), and one that validates them does not.
#[test]
fn unvalidated_shaders_are_named_in_the_warnings() {
    if !quarry_tests::lavapipe() {
        return;
    }
    let trace = quarry_tests::hostile::corpus("vkcube.qtrace");
    let warnings = |off: bool| {
        let mut c = quarry_tests::quarry_command();
        if off {
            c.env("QUARRY_REPLAY_SPIRV_VALIDATION", "0");
        }
        let out = c
            .arg("replay")
            .arg(&trace)
            .args(["--gpu", "llvmpipe", "--json"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        j["warnings"].to_string()
    };
    assert!(
        warnings(true).contains("shader modules are not validated"),
        "{}",
        warnings(true)
    );
    assert_eq!(
        warnings(false).contains("shader modules are not validated"),
        !replayer::validate::spirv::AVAILABLE
    );
}
