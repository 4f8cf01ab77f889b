//! Replay of traces forged from real ones (the checked-in demo and vkcube traces of the fuzz
//! corpus), every checksum valid: records removed, duplicated, moved or edited. Each must end
//! in one `quarry:` line naming the call's seq and name, exit 2, in well under a second of
//! replay, never in a crash inside the driver or a wait that times out (issue 22).

use std::time::{Duration, Instant};

use format::forge::{read_records, write_records};
use format::record::Record;
use quarry_tests::hostile::{
    call_mut, call_name, corpus, find, forged, forged_read_of_unsubmitted_work, refused, run, FAST,
};

#[test]
fn the_corpus_replays_as_it_is_and_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["demo.qtrace", "vkcube.qtrace"] {
        let Some((out, _)) = run(&corpus(name), &[]) else {
            return;
        };
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The record-level forger itself changes nothing.
        let p = forged(dir.path(), name, |_, _| {});
        let (out, _) = run(&p, &[]).unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn removed_fence_creation_is_named_not_a_double_free() {
    let dir = tempfile::tempdir().unwrap();
    let p = forged(dir.path(), "vkcube.qtrace", |recs, t| {
        let i = find(recs, t, "vkCreateFence", 0);
        recs.remove(i);
    });
    let Some((out, took)) = run(&p, &[]) else {
        return;
    };
    refused(&out, took, "vkWaitForFences", "fence 0x");
}

#[test]
fn destroyed_twice_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let p = forged(dir.path(), "vkcube.qtrace", |recs, t| {
        let i = find(recs, t, "vkDestroyFence", 0);
        let dup = recs[i].clone();
        recs.insert(i + 1, dup);
    });
    let Some((out, took)) = run(&p, &[]) else {
        return;
    };
    refused(&out, took, "vkDestroyFence", "was destroyed at call");
}

#[test]
fn wait_on_a_semaphore_nothing_signals_is_named_not_a_deadlock() {
    let dir = tempfile::tempdir().unwrap();
    // The acquire signals the semaphore the frame's submit waits on.
    let p = forged(dir.path(), "vkcube.qtrace", |recs, t| {
        let i = find(recs, t, "vkAcquireNextImageKHR", 1);
        recs.remove(i);
    });
    let Some((out, took)) = run(&p, &[]) else {
        return;
    };
    refused(&out, took, "vkQueueSubmit", "nothing replayed has signaled");
}

#[test]
fn wait_on_a_fence_no_submit_signals_is_named_not_a_timeout() {
    let dir = tempfile::tempdir().unwrap();
    // A frame's submit and present gone: the next wait for its fence can never end.
    let p = forged(dir.path(), "vkcube.qtrace", |recs, t| {
        let i = find(recs, t, "vkQueueSubmit", 2);
        recs.remove(i);
        let i = find(recs, t, "vkQueuePresentKHR", 1);
        recs.remove(i);
    });
    let Some((out, took)) = run(&p, &[]) else {
        return;
    };
    refused(
        &out,
        took,
        "vkWaitForFences",
        "no replayed submission signals",
    );
}

#[test]
fn commands_outside_recording_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let p = forged(dir.path(), "demo.qtrace", |recs, t| {
        let i = find(recs, t, "vkEndCommandBuffer", 0);
        let cmd = recs[..i]
            .iter()
            .rposition(|r| matches!(r, Record::Call(c) if call_name(t, c).starts_with("vkCmd")))
            .unwrap();
        let r = recs.remove(cmd);
        recs.insert(i, r);
    });
    let Some((out, took)) = run(&p, &[]) else {
        return;
    };
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not recording (it is executable)"), "{err}");
    refused(&out, took, "vkCmd", "");
}

#[test]
fn submit_of_a_command_buffer_never_ended_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let p = forged(dir.path(), "vkcube.qtrace", |recs, t| {
        let i = find(recs, t, "vkEndCommandBuffer", 0);
        recs.remove(i);
    });
    let Some((out, took)) = run(&p, &[]) else {
        return;
    };
    refused(&out, took, "vkQueueSubmit", "still recording");
}

/// Offset of the first occurrence of `needle` in `hay`.
fn at(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len())
        .position(|w| w == needle)
        .expect("pattern in the parameters")
}

#[test]
fn forged_counts_are_named() {
    let dir = tempfile::tempdir().unwrap();
    // vkQueueSubmit: VkSubmitInfo.commandBufferCount 1 -> 3, its array still holding one.
    let p = forged(dir.path(), "vkcube.qtrace", |recs, t| {
        let i = find(recs, t, "vkQueueSubmit", 0);
        let c = call_mut(&mut recs[i]);
        // commandBufferCount (u32 1), array present (1), its length (u64 1).
        let mut pat = 1u32.to_le_bytes().to_vec();
        pat.push(1);
        pat.extend(1u64.to_le_bytes());
        let o = at(&c.params, &pat);
        c.params[o..o + 4].copy_from_slice(&3u32.to_le_bytes());
    });
    let Some((out, took)) = run(&p, &[]) else {
        return;
    };
    refused(&out, took, "vkQueueSubmit", "is 3 but");
}

#[test]
fn forged_handles_are_named() {
    let dir = tempfile::tempdir().unwrap();
    // A submit naming the device where its queue should be: wrong type, never created as one.
    let p = forged(dir.path(), "vkcube.qtrace", |recs, t| {
        let i = find(recs, t, "vkQueueSubmit", 1);
        let c = call_mut(&mut recs[i]);
        c.params[..8].copy_from_slice(&0x5151_5151u64.to_le_bytes());
    });
    let Some((out, took)) = run(&p, &[]) else {
        return;
    };
    refused(&out, took, "vkQueueSubmit", "0x51515151 was never created");
}

#[test]
fn a_missing_block_ends_quickly() {
    let dir = tempfile::tempdir().unwrap();
    let (header, recs) = read_records(&corpus("vkcube.qtrace")).unwrap();
    let small = dir.path().join("small.qtrace");
    write_records(&small, header, &recs, 2048).unwrap();
    let bytes = std::fs::read(&small).unwrap();
    let f = format::forge::Forge::parse(&bytes);
    let blocks = f.of_kind(format::layout::BlockKind::Records);
    assert!(blocks.len() > 6, "{} blocks", blocks.len());
    let t = Instant::now();
    // Every middle block in turn: the replay stops at the first call the loss makes impossible
    // (or replays what is left), each at once: no 10 s wait per missing submit.
    for &b in &blocks[1..blocks.len() - 1] {
        let mut g = f.clone();
        g.delete(b);
        let p = dir.path().join(format!("missing-{b}.qtrace"));
        std::fs::write(&p, g.bytes()).unwrap();
        let Some((out, took)) = run(&p, &["--salvage"]) else {
            return;
        };
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(matches!(out.status.code(), Some(0 | 2)), "block {b}: {err}");
        assert!(took < FAST, "block {b}: took {took:?}: {err}");
    }
    assert!(t.elapsed() < Duration::from_secs(120), "{:?}", t.elapsed());
}

#[test]
fn query_read_of_work_never_submitted_is_named_not_a_timeout() {
    let dir = tempfile::tempdir().unwrap();
    // The submit of the demo's first query reads gone, with the fence wait after it.
    let p = forged_read_of_unsubmitted_work(dir.path());
    let Some((out, took)) = run(&p, &[]) else {
        return;
    };
    refused(
        &out,
        took,
        "vkGetQueryPoolResults",
        "never submitted in the replay",
    );
}

/// The fuzzer's hang of the final session-12 CI run: the demo's timestamp writes deleted. Its
/// copies of those queries with VK_QUERY_RESULT_WAIT_BIT would wait on the GPU for ever: refused
/// at their submission (issue 37, `validate::gpuwait`).
#[test]
fn copies_with_wait_of_queries_nothing_writes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = forged(dir.path(), "demo.qtrace", |recs, t| {
        recs.retain(|r| {
            !matches!(r, Record::Call(c)
                if matches!(call_name(t, c), "vkCmdWriteTimestamp" | "vkCmdWriteTimestamp2"))
        });
    });
    let Some((out, took)) = run(&p, &[]) else {
        return;
    };
    refused(
        &out,
        took,
        "vkQueueSubmit",
        "with VK_QUERY_RESULT_WAIT_BIT, but no command submitted before the copy writes it since its reset",
    );
}

/// The same without the demo's query copies: the host reads after the fence wait find the
/// queries unavailable; with no replayed work outstanding they are not waited for (each waited
/// 10 s before): a mismatch, reported at once.
#[test]
fn reads_of_queries_nothing_outstanding_writes_are_not_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let p = forged(dir.path(), "demo.qtrace", |recs, t| {
        recs.retain(|r| match r {
            Record::Call(c) => !matches!(
                call_name(t, c),
                "vkCmdWriteTimestamp" | "vkCmdWriteTimestamp2" | "vkCmdCopyQueryPoolResults"
            ),
            Record::QueryCopy(_) => false,
            _ => true,
        });
    });
    let Some((out, took)) = run(&p, &["--compare"]) else {
        return;
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("UNAVAILABLE") && stdout.contains("(TIMESTAMP)"),
        "{stdout}"
    );
    assert!(took < FAST, "took {took:?}");
}

/// `quarry replay` judges damage as `info`, `dump`, `export` and `view` do.
#[test]
fn replay_shares_the_damage_policy() {
    let dir = tempfile::tempdir().unwrap();
    let (header, recs) = read_records(&corpus("vkcube.qtrace")).unwrap();
    let small = dir.path().join("small.qtrace");
    write_records(&small, header, &recs, 2048).unwrap();
    let f = format::forge::Forge::parse(&std::fs::read(&small).unwrap());

    // A block missing: refused without --salvage, before anything is replayed.
    let mut g = f.clone();
    g.delete(f.of_kind(format::layout::BlockKind::Records)[3]);
    let p = dir.path().join("missing.qtrace");
    std::fs::write(&p, g.bytes_with_index(|_| {})).unwrap();
    let Some((out, _)) = run(&p, &[]) else {
        return;
    };
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.trim().lines().count() == 1 && err.contains("--salvage"),
        "{err}"
    );
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // The writer killed between two blocks, nothing lost: replayed, exit 0, with a note.
    let p = dir.path().join("nofooter.qtrace");
    std::fs::write(&p, f.bytes()).unwrap();
    let (out, _) = run(&p, &[]).unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("quarry: note:"), "{err}");
}

/// Removes the `nth` call named `name`.
fn drop_call(name: &'static str, nth: usize) -> impl FnOnce(&mut Vec<Record>, &[String]) {
    move |recs, t| {
        let i = find(recs, t, name, nth);
        recs.remove(i);
    }
}

/// Crashes of lavapipe the fuzzer (`fuzz_replay`) found behind traces the checks accepted, each
/// made again by the smallest edit that shows it; all are clean errors now.
#[test]
fn fuzz_crashers_are_clean_errors() {
    let dir = tempfile::tempdir().unwrap();
    type Edit = Box<dyn FnOnce(&mut Vec<Record>, &[String])>;
    let cases: Vec<(&str, Edit, &str, &str)> = vec![
        (
            "demo.qtrace",
            Box::new(|recs: &mut Vec<Record>, t: &[String]| {
                let i = find(recs, t, "vkCmdCopyBuffer", 0);
                // srcBuffer follows the command buffer.
                call_mut(&mut recs[i]).params[8..16].fill(0);
            }),
            "vkCmdCopyBuffer",
            "srcBuffer is VK_NULL_HANDLE",
        ),
        (
            "demo.qtrace",
            // The binding of the first vertex buffer's memory gone.
            Box::new(|recs: &mut Vec<Record>, t: &[String]| {
                let i = find(recs, t, "vkCmdBindVertexBuffers", 0);
                // command buffer, firstBinding, bindingCount, array flag and length, buffer.
                let buffer = call_mut(&mut recs[i]).params[25..33].to_vec();
                let b = recs
                    .iter()
                    .position(|r| {
                        matches!(r, Record::Call(c) if call_name(t, c) == "vkBindBufferMemory"
                            && c.params[8..16] == buffer[..])
                    })
                    .unwrap();
                recs.remove(b);
            }),
            "vkCmdBindVertexBuffers",
            "has no memory bound",
        ),
        (
            // Caught where its view is made (a view needs its image's memory bound).
            "demo.qtrace",
            Box::new(drop_call("vkBindImageMemory", 0)),
            "vkCreateImageView",
            "has no memory bound",
        ),
        (
            "demo.qtrace",
            Box::new(drop_call("vkCmdBindPipeline", 0)),
            "vkCmd",
            "without a graphics pipeline bound",
        ),
        (
            "demo.qtrace",
            Box::new(drop_call("vkCmdEndQuery", 0)),
            "vkEndCommandBuffer",
            "is still active",
        ),
        (
            "demo.qtrace",
            Box::new(drop_call("vkCmdBeginQuery", 0)),
            "vkCmdEndQuery",
            "was not begun",
        ),
        (
            "demo.qtrace",
            Box::new(|recs: &mut Vec<Record>, t: &[String]| {
                let i = find(recs, t, "vkCmdCopyBuffer", 0);
                // Command buffer, src, dst, regionCount, array flag and length, then the first
                // region's srcOffset, dstOffset and size.
                call_mut(&mut recs[i]).params[53..61].copy_from_slice(&(1u64 << 40).to_le_bytes());
            }),
            "vkCmdCopyBuffer",
            "are outside buffer",
        ),
        (
            // A hang: an acquire the capture saw time out signals nothing in the replay either.
            "vkcube.qtrace",
            Box::new(|recs: &mut Vec<Record>, t: &[String]| {
                let i = find(recs, t, "vkAcquireNextImageKHR", 1);
                call_mut(&mut recs[i]).result = 2;
            }),
            "vkQueueSubmit",
            "nothing replayed has signaled",
        ),
        (
            "vkcube.qtrace",
            Box::new(drop_call("vkCmdBeginRenderPass", 0)),
            "vkCmd",
            "outside a render pass instance",
        ),
    ];
    for (k, (trace, edit, call, why)) in cases.into_iter().enumerate() {
        let p = forged(dir.path(), trace, edit);
        let p2 = dir.path().join(format!("case-{k}.qtrace"));
        std::fs::rename(&p, &p2).unwrap();
        eprintln!("case {k}: {trace} {call}");
        let Some((out, took)) = run(&p2, &[]) else {
            return;
        };
        refused(&out, took, call, why);
    }
}

/// Overwrites the first `from` in the parameters of the `nth` call named `name` that holds
/// one with `to`.
fn poke(
    name: &'static str,
    nth: usize,
    from: Vec<u8>,
    to: Vec<u8>,
) -> impl FnOnce(&mut Vec<Record>, &[String]) {
    move |recs, t| {
        let c = recs
            .iter_mut()
            .filter_map(|r| match r {
                Record::Call(c) if call_name(t, c) == name => Some(c),
                _ => None,
            })
            .filter(|c| c.params.windows(from.len()).any(|w| w == from))
            .nth(nth)
            .unwrap_or_else(|| panic!("no call {name} #{nth} holding the pattern"));
        let o = at(&c.params, &from);
        c.params[o..o + to.len()].copy_from_slice(&to);
    }
}

/// Moves the first call named `name` to just before the last `before` call that precedes it
/// and holds `holding` in its parameters.
fn move_before(
    name: &'static str,
    before: &'static str,
    holding: Vec<u8>,
) -> impl FnOnce(&mut Vec<Record>, &[String]) {
    move |recs, t| {
        let i = find(recs, t, name, 0);
        let j = (0..i)
            .rev()
            .find(|j| {
                matches!(&recs[*j], Record::Call(c) if call_name(t, c) == before
                    && (holding.is_empty()
                        || c.params.windows(holding.len()).any(|w| w == holding)))
            })
            .unwrap_or_else(|| panic!("no {before} before {name}"));
        let r = recs.remove(i);
        recs.insert(j, r);
    }
}

/// The bytes of `words` (u32s) in a row.
fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A count of `n` followed by its array's present flag and length.
fn counted(n: u32) -> Vec<u8> {
    let mut v = n.to_le_bytes().to_vec();
    v.push(1);
    v.extend(u64::from(n).to_le_bytes());
    v
}

fn handle(h: u64) -> Vec<u8> {
    h.to_le_bytes().to_vec()
}

/// Crashes of lavapipe the fuzzer found behind objects that were each live and of the right
/// type but did not fit together (or numbers past a limit of the replay GPU): descriptor writes
/// against their set's layout, views against their image, framebuffers against render passes,
/// command buffer levels, null handles inside arrays. All are clean errors now.
#[test]
fn fuzz_crashers_of_compatibility_are_clean_errors() {
    let dir = tempfile::tempdir().unwrap();
    type Edit = Box<dyn FnOnce(&mut Vec<Record>, &[String])>;
    let cases: Vec<(&str, Edit, &str, &str)> = vec![
        (
            // descriptorSetCount 1 -> 0 beside a pDescriptorSets of one: the set named later
            // was never allocated by the replay.
            "vkcube.qtrace",
            Box::new(|recs: &mut Vec<Record>, t: &[String]| {
                let i = find(recs, t, "vkAllocateDescriptorSets", 0);
                let c = call_mut(&mut recs[i]);
                let o = at(&c.params, &counted(1));
                c.params[o..o + 4].copy_from_slice(&0u32.to_le_bytes());
            }),
            "vkAllocateDescriptorSets",
            "holds 1 handles for a count of 0",
        ),
        (
            // One captured buffer created twice: the second replayed buffer has no memory.
            "vkcube.qtrace",
            Box::new(|recs: &mut Vec<Record>, t: &[String]| {
                let i = find(recs, t, "vkCreateBuffer", 1);
                let r = recs[i].clone();
                recs.insert(i + 1, r);
            }),
            "vkCreateBuffer",
            "is created again while it is live",
        ),
        (
            "vkcube.qtrace",
            Box::new(poke("vkCreateFramebuffer", 1, counted(2), words(&[1]))),
            "vkCreateFramebuffer",
            "attachmentCount is 1 but render pass",
        ),
        (
            // dynamicStateCount 2 -> 1 beside [VIEWPORT, SCISSOR] (seed 0x33): the scissor is
            // static with pScissors NULL, which lavapipe read at the draw.
            "vkcube.qtrace",
            Box::new(poke(
                "vkCreateGraphicsPipelines",
                0,
                [counted(2), words(&[0, 1])].concat(),
                [words(&[1]), counted(2)[4..].to_vec(), words(&[0, 1])].concat(),
            )),
            "vkCreateGraphicsPipelines",
            "scissors are not dynamic state, but pScissors holds 0 of its scissorCount 1",
        ),
        (
            // A null signal semaphore inside a batch.
            "vkcube.qtrace",
            Box::new(poke(
                "vkQueueSubmit",
                0,
                handle(0x558d_870d_f660),
                handle(0),
            )),
            "vkQueueSubmit",
            "a signal semaphore 0 is VK_NULL_HANDLE",
        ),
        (
            "vkcube.qtrace",
            Box::new(|recs: &mut Vec<Record>, t: &[String]| {
                let i = find(recs, t, "vkResetFences", 0);
                // device, fenceCount, array flag and length, the fence.
                call_mut(&mut recs[i]).params[21..29].fill(0);
            }),
            "vkResetFences",
            "pFences 0 is VK_NULL_HANDLE",
        ),
        (
            // A view of mip level 1 of a swapchain image (one level).
            "vkcube.qtrace",
            Box::new(poke(
                "vkCreateImageView",
                0,
                words(&[1, 0, 1, 0, 1]),
                words(&[1, 1]),
            )),
            "vkCreateImageView",
            "mip levels 1..+1 are outside image",
        ),
        (
            // The depth view (D16) made of a swapchain image (B8G8R8A8).
            "vkcube.qtrace",
            Box::new(poke(
                "vkCreateImageView",
                0,
                handle(0x558d_8728_5090),
                handle(0x558d_8728_2dc0),
            )),
            "vkCreateImageView",
            "differs from image",
        ),
        (
            "vkcube.qtrace",
            Box::new(drop_call("vkUpdateDescriptorSets", 0)),
            "vkCmdDraw",
            "was never written, but pipeline",
        ),
        (
            // A write to binding 5 of a layout with bindings 0 and 1.
            "vkcube.qtrace",
            Box::new(poke(
                "vkUpdateDescriptorSets",
                0,
                words(&[1, 0, 1, 1]),
                words(&[5]),
            )),
            "vkUpdateDescriptorSets",
            "has no binding 5",
        ),
        (
            // A storage buffer written to the uniform buffer binding.
            "vkcube.qtrace",
            Box::new(poke(
                "vkUpdateDescriptorSets",
                0,
                words(&[0, 0, 1, 6]),
                words(&[0, 0, 1, 7]),
            )),
            "vkUpdateDescriptorSets",
            "writes descriptors of type 7 to binding 0",
        ),
        (
            "vkcube.qtrace",
            Box::new(|recs: &mut Vec<Record>, t: &[String]| {
                let i = find(recs, t, "vkCmdBindDescriptorSets", 0);
                // command buffer, bind point, layout, then firstSet.
                call_mut(&mut recs[i]).params[20..24].copy_from_slice(&5u32.to_le_bytes());
            }),
            "vkCmdBindDescriptorSets",
            "binds sets 5..+1 but pipeline layout",
        ),
        (
            // A render area past the framebuffer's 500x500.
            "vkcube.qtrace",
            Box::new(poke(
                "vkCmdBeginRenderPass",
                0,
                words(&[0, 0, 500, 500]),
                words(&[0, 0, 501]),
            )),
            "vkCmdBeginRenderPass",
            "is outside framebuffer",
        ),
        (
            // A binding holding 2^31 descriptors.
            "vkcube.qtrace",
            Box::new(poke(
                "vkCreateDescriptorSetLayout",
                0,
                words(&[0, 6, 1]),
                words(&[0, 6, 1 << 31]),
            )),
            "vkCreateDescriptorSetLayout",
            "descriptors, over the replay GPU's",
        ),
        (
            "demo.qtrace",
            Box::new(|recs: &mut Vec<Record>, t: &[String]| {
                let i = find(recs, t, "vkCmdBindVertexBuffers", 0);
                // firstBinding follows the command buffer.
                call_mut(&mut recs[i]).params[8..12].copy_from_slice(&(1u32 << 20).to_le_bytes());
            }),
            "vkCmdBindVertexBuffers",
            "exceed the replay GPU's",
        ),
        (
            "demo.qtrace",
            Box::new(|recs: &mut Vec<Record>, t: &[String]| {
                let i = find(recs, t, "vkCmdBeginQueryIndexedEXT", 0);
                // command buffer, pool, query, flags, then index.
                let index = 793_439_160u32.to_le_bytes();
                call_mut(&mut recs[i]).params[24..28].copy_from_slice(&index);
            }),
            "vkCmdBeginQueryIndexedEXT",
            "query index 793439160 is not below",
        ),
        (
            "demo.qtrace",
            Box::new(|recs: &mut Vec<Record>, t: &[String]| {
                let i = find(recs, t, "vkCmdBindTransformFeedbackBuffersEXT", 0);
                // command buffer, firstBinding, bindingCount, array flag and length, buffers.
                call_mut(&mut recs[i]).params[25..33].fill(0);
            }),
            "vkCmdBindTransformFeedbackBuffersEXT",
            "pBuffers 0 is VK_NULL_HANDLE",
        ),
        (
            "demo.qtrace",
            Box::new(|recs: &mut Vec<Record>, t: &[String]| {
                let i = find(recs, t, "vkAllocateDescriptorSets", 0);
                let c = call_mut(&mut recs[i]);
                // The layout array's one element closes the allocate info.
                let o = at(&c.params, &counted(1)) + 13;
                c.params[o..o + 8].fill(0);
            }),
            "vkAllocateDescriptorSets",
            "pSetLayouts 0 is VK_NULL_HANDLE",
        ),
        (
            // A query begun before the reset of its pool in the same recording.
            "demo.qtrace",
            Box::new(move_before(
                "vkCmdBeginQueryIndexedEXT",
                "vkCmdResetQueryPool",
                handle(0x5620_610e_27d0),
            )),
            "vkCmdResetQueryPool",
            "while it is active",
        ),
        (
            // A query begun before the render pass instance it is ended in.
            "demo.qtrace",
            Box::new(move_before(
                "vkCmdBeginQueryIndexedEXT",
                "vkCmdBeginRendering",
                Vec::new(),
            )),
            "vkCmdEndQueryIndexedEXT",
            "was begun outside any render pass instance but is ended inside",
        ),
        (
            // setLayoutCount 1 -> 0 beside its array: the shaders use set 0.
            "vkcube.qtrace",
            Box::new(|recs: &mut Vec<Record>, t: &[String]| {
                let i = find(recs, t, "vkCreatePipelineLayout", 0);
                let c = call_mut(&mut recs[i]);
                let o = at(&c.params, &counted(1));
                c.params[o..o + 4].copy_from_slice(&0u32.to_le_bytes());
            }),
            "vkCreateGraphicsPipelines",
            "uses descriptor set 0, but pipeline layout",
        ),
        (
            // A draw with no descriptor set bound.
            "vkcube.qtrace",
            Box::new(drop_call("vkCmdBindDescriptorSets", 0)),
            "vkCmdDraw",
            "descriptor set 0 is not bound",
        ),
        (
            "vkcube.qtrace",
            Box::new(poke(
                "vkAllocateDescriptorSets",
                0,
                handle(0x558d_871b_66b0),
                handle(0),
            )),
            "vkAllocateDescriptorSets",
            "descriptorPool is VK_NULL_HANDLE",
        ),
        (
            // The depth image's memory binding gone: its view (an attachment) has none.
            "vkcube.qtrace",
            Box::new(drop_call("vkBindImageMemory", 0)),
            "vkCreateImageView",
            "has no memory bound",
        ),
        (
            // The uniform buffer's memory binding gone: a descriptor of it has none.
            "vkcube.qtrace",
            Box::new(|recs: &mut Vec<Record>, t: &[String]| {
                let ubo = handle(0x558d_870d_11b0);
                let i = recs
                    .iter()
                    .position(|r| {
                        matches!(r, Record::Call(c) if call_name(t, c) == "vkBindBufferMemory"
                            && c.params[8..16] == ubo[..])
                    })
                    .unwrap();
                recs.remove(i);
            }),
            "vkUpdateDescriptorSets",
            "has no memory bound",
        ),
        (
            // The pipeline layout's one set layout VK_NULL_HANDLE: the shaders use set 0.
            "vkcube.qtrace",
            Box::new(poke(
                "vkCreatePipelineLayout",
                0,
                handle(0x558d_86f5_7fd0),
                handle(0),
            )),
            "vkCreateGraphicsPipelines",
            "leaves VK_NULL_HANDLE",
        ),
        (
            // A VK_NULL_HANDLE set bound where the compute shader reads set 0.
            "demo.qtrace",
            Box::new(|recs: &mut Vec<Record>, t: &[String]| {
                let i = find(recs, t, "vkCmdBindDescriptorSets", 0);
                // command buffer, bind point, layout, firstSet, count, array flag and
                // length, then the set.
                call_mut(&mut recs[i]).params[37..45].fill(0);
            }),
            "vkCmdDispatch",
            "descriptor set 0 is not bound",
        ),
        (
            "demo.qtrace",
            Box::new(|recs: &mut Vec<Record>, t: &[String]| {
                let i = find(recs, t, "vkCmdPushConstants", 0);
                // command buffer, layout, stageFlags, then offset.
                let o = 3_153_522_057u32.to_le_bytes();
                call_mut(&mut recs[i]).params[20..24].copy_from_slice(&o);
            }),
            "vkCmdPushConstants",
            "exceed the replay GPU's",
        ),
        (
            // 32939 layers rendered to one-layer views.
            "demo.qtrace",
            Box::new(poke(
                "vkCmdBeginRendering",
                0,
                words(&[64, 64, 1, 0, 1]),
                words(&[64, 64, 32939]),
            )),
            "vkCmdBeginRendering",
            "renders 32939 layers to image view",
        ),
        (
            // A border color past the enum.
            "vkcube.qtrace",
            Box::new(poke(
                "vkCreateSampler",
                0,
                words(&[0x3f80_0000, 0, 0, 0, 0, 4, 0]),
                words(&[0x3f80_0000, 0, 0, 0, 0, 77]),
            )),
            "vkCreateSampler",
            "is not a valid value",
        ),
        (
            // stageCount 2 -> 0 beside its two stages.
            "demo.qtrace",
            Box::new(poke(
                "vkCreateGraphicsPipelines",
                0,
                counted(2),
                words(&[0]),
            )),
            "vkCreateGraphicsPipelines",
            "its 0 stages have no vertex or mesh shader",
        ),
        (
            // A fence created twice (a later creation moved before the first one's destroy):
            // two replayed fences for one captured handle, one destroyed twice.
            "demo.qtrace",
            Box::new(|recs: &mut Vec<Record>, t: &[String]| {
                let i = find(recs, t, "vkCreateFence", 1);
                let r = recs[i].clone();
                recs.insert(i + 1, r);
            }),
            "vkCreateFence",
            "is created again while it is live",
        ),
        (
            "demo.qtrace",
            Box::new(|recs: &mut Vec<Record>, t: &[String]| {
                let i = find(recs, t, "vkCreateDevice", 0);
                let r = recs[i].clone();
                recs.insert(i + 1, r);
            }),
            "vkCreateDevice",
            "is created again while it is live",
        ),
        (
            "demo.qtrace",
            Box::new(poke(
                "vkCreateGraphicsPipelines",
                0,
                handle(0x5620_60ab_2420),
                handle(0),
            )),
            "vkCreateGraphicsPipelines",
            "a pipeline's layout is VK_NULL_HANDLE",
        ),
        (
            // A draw of 3.5 billion vertices from a buffer of a few.
            "demo.qtrace",
            Box::new(|recs: &mut Vec<Record>, t: &[String]| {
                let i = find(recs, t, "vkCmdDraw", 0);
                // vertexCount follows the command buffer.
                let n = 3_541_434_950u32.to_le_bytes();
                call_mut(&mut recs[i]).params[8..12].copy_from_slice(&n);
            }),
            "vkCmdDraw",
            "read past vertex buffer",
        ),
    ];
    for (k, (trace, edit, call, why)) in cases.into_iter().enumerate() {
        let p = forged(dir.path(), trace, edit);
        let p2 = dir.path().join(format!("compat-{k}.qtrace"));
        std::fs::rename(&p, &p2).unwrap();
        eprintln!("case {k}: {trace} {call}: {why}");
        let Some((out, took)) = run(&p2, &[]) else {
            return;
        };
        refused(&out, took, call, why);
    }
}
