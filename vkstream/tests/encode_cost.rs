//! Encode cost per call, printed for the report:
//! `cargo test -p vkstream --release --test encode_cost -- --nocapture`.

use ash::vk;
use ash::vk::Handle;
use std::time::Instant;
use vkstream::{decode_call, encode, ids, Call, Encoder};

fn per_call_ns(iters: u32, mut f: impl FnMut(&mut Encoder)) -> (f64, usize) {
    let mut e = Encoder::new();
    for _ in 0..1000 {
        e.clear();
        f(&mut e);
    }
    let start = Instant::now();
    for _ in 0..iters {
        e.clear();
        f(&mut e);
        std::hint::black_box(e.as_bytes());
    }
    (start.elapsed().as_nanos() as f64 / iters as f64, e.len())
}

#[test]
fn encode_cost_per_call() {
    let cb = vk::CommandBuffer::from_raw(0x7f00_1234_5678);
    let (draw_ns, draw_len) = per_call_ns(1_000_000, |e| unsafe {
        encode::vkCmdDraw(e, cb, 3, 1, 0, 0)
    });
    // Handle (8) + four u32.
    assert_eq!(draw_len, 24);

    let sets = [
        vk::DescriptorSet::from_raw(1),
        vk::DescriptorSet::from_raw(2),
        vk::DescriptorSet::from_raw(3),
    ];
    let offsets = [256u32, 512];
    let layout = vk::PipelineLayout::from_raw(9);
    let (bind_ns, bind_len) = per_call_ns(1_000_000, |e| unsafe {
        encode::vkCmdBindDescriptorSets(
            e,
            cb,
            vk::PipelineBindPoint::GRAPHICS,
            layout,
            0,
            sets.len() as u32,
            sets.as_ptr(),
            offsets.len() as u32,
            offsets.as_ptr(),
        )
    });
    let mut e = Encoder::new();
    unsafe {
        encode::vkCmdBindDescriptorSets(
            &mut e,
            cb,
            vk::PipelineBindPoint::GRAPHICS,
            layout,
            0,
            3,
            sets.as_ptr(),
            2,
            offsets.as_ptr(),
        )
    };
    assert_eq!(e.len(), bind_len);
    let Call::vkCmdBindDescriptorSets(p) =
        decode_call(ids::vkCmdBindDescriptorSets, e.as_bytes()).unwrap()
    else {
        panic!("wrong call")
    };
    assert_eq!(p.p_descriptor_sets, Some(vec![1, 2, 3]));
    assert_eq!(p.p_dynamic_offsets, Some(vec![256, 512]));

    let (dec_ns, _) = per_call_ns(200_000, |e2| {
        let _ = std::hint::black_box(decode_call(ids::vkCmdBindDescriptorSets, e.as_bytes()));
        e2.u8(0);
    });
    println!("encode vkCmdDraw: {draw_ns:.1} ns/call ({draw_len} bytes)");
    println!("encode vkCmdBindDescriptorSets (3 sets, 2 dynamic offsets): {bind_ns:.1} ns/call ({bind_len} bytes)");
    println!("decode vkCmdBindDescriptorSets: {dec_ns:.1} ns/call");
}
