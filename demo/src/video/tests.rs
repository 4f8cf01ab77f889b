use super::h264::*;
use super::*;

/// Minimal reader to parse back what the writer produced.
struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn bit(&mut self) -> u32 {
        let b = (self.data[self.pos / 8] >> (7 - self.pos % 8)) & 1;
        self.pos += 1;
        u32::from(b)
    }
    fn u(&mut self, n: u32) -> u32 {
        (0..n).fold(0, |acc, _| (acc << 1) | self.bit())
    }
    fn ue(&mut self) -> u32 {
        let mut zeros = 0;
        while self.bit() == 0 {
            zeros += 1;
        }
        // Up to 32 leading zeros (u32::MAX), so compute in 64 bits.
        let rest = (0..zeros).fold(0u64, |acc, _| (acc << 1) | u64::from(self.bit()));
        (((1u64 << zeros) | rest) - 1) as u32
    }
    fn se(&mut self) -> i32 {
        let k = self.ue() as i32;
        if k % 2 == 1 {
            (k + 1) / 2
        } else {
            -(k / 2)
        }
    }
}

fn bits(f: impl FnOnce(&mut BitWriter)) -> String {
    let mut w = BitWriter::default();
    f(&mut w);
    let n = w.bytes.len() * 8 + w.pending_bits() as usize;
    let bytes = w.finish();
    bytes
        .iter()
        .flat_map(|b| {
            (0..8)
                .rev()
                .map(move |i| if b >> i & 1 == 1 { '1' } else { '0' })
        })
        .take(n)
        .collect()
}

#[test]
fn exp_golomb_codes() {
    assert_eq!(bits(|w| w.ue(0)), "1");
    assert_eq!(bits(|w| w.ue(1)), "010");
    assert_eq!(bits(|w| w.ue(2)), "011");
    assert_eq!(bits(|w| w.ue(3)), "00100");
    assert_eq!(bits(|w| w.ue(7)), "0001000");
    assert_eq!(bits(|w| w.ue(I_PCM)), "000011010");
    assert_eq!(bits(|w| w.se(0)), "1");
    assert_eq!(bits(|w| w.se(1)), "010");
    assert_eq!(bits(|w| w.se(-1)), "011");
    assert_eq!(bits(|w| w.se(2)), "00100");
    assert_eq!(bits(|w| w.se(-2)), "00101");
    assert_eq!(bits(|w| w.u(4, 0b1010)), "1010");
    // Round trip over a range, including the largest code.
    let mut w = BitWriter::default();
    let vals = [0u32, 1, 5, 25, 254, 255, 256, 65_535, u32::MAX];
    for &v in &vals {
        w.ue(v);
    }
    for v in [-3i32, 0, 3, -1000, 1000] {
        w.se(v);
    }
    let data = w.finish();
    let mut r = Reader {
        data: &data,
        pos: 0,
    };
    for &v in &vals {
        assert_eq!(r.ue(), v);
    }
    for v in [-3i32, 0, 3, -1000, 1000] {
        assert_eq!(r.se(), v);
    }
    assert_eq!(r.bit(), 1, "stop bit");
}

#[test]
fn emulation_prevention() {
    assert_eq!(escape(&[0, 0, 1]), vec![0, 0, 3, 1]);
    assert_eq!(escape(&[0, 0, 0, 0]), vec![0, 0, 3, 0, 0]);
    assert_eq!(escape(&[0, 0, 4, 0, 0, 3]), vec![0, 0, 4, 0, 0, 3, 3]);
    assert_eq!(escape(&[1, 0, 2, 0]), vec![1, 0, 2, 0]);
    let n = nal(3, 5, &[0, 0, 2]);
    assert_eq!(n, vec![0, 0, 1, 0x65, 0, 0, 3, 2]);
}

#[test]
fn idr_slice_parses_back() {
    let (w_mbs, h_mbs) = (3u32, 2u32);
    let (w, h) = (48usize, 32usize);
    let (luma, cb, cr) = test_picture(w, h);
    assert!(luma.iter().chain(&cb).chain(&cr).all(|&s| s != 0));
    let nalu = idr_slice(w_mbs, h_mbs, &luma, &cb, &cr);
    assert_eq!(
        &nalu[..4],
        &[0, 0, 1, 0x65],
        "start code, IDR, nal_ref_idc 3"
    );
    // No start code prefix inside the payload.
    assert!(!nalu[4..]
        .windows(3)
        .any(|s| s[0] == 0 && s[1] == 0 && s[2] <= 2));
    // This picture needs no escapes, so the payload is the RBSP.
    let rbsp = &nalu[4..];
    let mut r = Reader { data: rbsp, pos: 0 };
    assert_eq!(r.ue(), 0, "first_mb_in_slice");
    assert_eq!(r.ue(), 7, "slice_type");
    assert_eq!(r.ue(), 0, "pps id");
    assert_eq!(r.u(LOG2_MAX_FRAME_NUM), 0, "frame_num");
    assert_eq!(r.ue(), 0, "idr_pic_id");
    assert_eq!(r.u(LOG2_MAX_POC_LSB), 0, "poc lsb");
    assert_eq!(r.u(2), 0, "dec_ref_pic_marking");
    assert_eq!(r.se(), 0, "slice_qp_delta");
    assert_eq!(r.ue(), 1, "disable_deblocking_filter_idc");
    let mut got_luma = vec![0u8; w * h];
    let mut got_cb = vec![0u8; w * h / 4];
    let mut got_cr = vec![0u8; w * h / 4];
    for my in 0..h_mbs as usize {
        for mx in 0..w_mbs as usize {
            assert_eq!(r.ue(), I_PCM);
            while !r.pos.is_multiple_of(8) {
                assert_eq!(r.bit(), 0, "pcm_alignment_zero_bit");
            }
            for y in 0..16 {
                for x in 0..16 {
                    got_luma[(my * 16 + y) * w + mx * 16 + x] = r.u(8) as u8;
                }
            }
            for plane in [&mut got_cb, &mut got_cr] {
                for y in 0..8 {
                    for x in 0..8 {
                        plane[(my * 8 + y) * (w / 2) + mx * 8 + x] = r.u(8) as u8;
                    }
                }
            }
        }
    }
    assert_eq!(got_luma, luma);
    assert_eq!(got_cb, cb);
    assert_eq!(got_cr, cr);
    // rbsp_slice_trailing_bits: stop bit, zeros, end of data.
    assert_eq!(r.bit(), 1);
    while !r.pos.is_multiple_of(8) {
        assert_eq!(r.bit(), 0);
    }
    assert_eq!(r.pos, rbsp.len() * 8);
}

#[test]
fn extent_covers_minimum_and_granularity() {
    let e = |w, h| vk::Extent2D {
        width: w,
        height: h,
    };
    assert_eq!(coded_extent(e(1, 1), e(1, 1)), e(16, 16));
    assert_eq!(coded_extent(e(48, 16), e(16, 16)), e(48, 16));
    assert_eq!(coded_extent(e(40, 20), e(1, 1)), e(48, 32));
    // Granularity 32: whole macroblocks and multiples of 32.
    assert_eq!(coded_extent(e(48, 16), e(32, 32)), e(64, 32));
    assert_eq!(coded_extent(e(16, 16), e(24, 8)), e(48, 16));
}

#[test]
fn std_parameter_sets_match_the_slice() {
    let sps = std_sps(
        sv::StdVideoH264ProfileIdc_STD_VIDEO_H264_PROFILE_IDC_HIGH,
        sv::StdVideoH264LevelIdc_STD_VIDEO_H264_LEVEL_IDC_4_1,
        (3, 2),
    );
    assert_eq!(sps.pic_width_in_mbs_minus1, 2);
    assert_eq!(sps.pic_height_in_map_units_minus1, 1);
    assert_eq!(sps.flags.frame_mbs_only_flag(), 1);
    assert_eq!(
        u32::from(sps.log2_max_frame_num_minus4) + 4,
        LOG2_MAX_FRAME_NUM
    );
    assert_eq!(
        u32::from(sps.log2_max_pic_order_cnt_lsb_minus4) + 4,
        LOG2_MAX_POC_LSB
    );
    assert!(sps.pScalingLists.is_null() && sps.pSequenceParameterSetVui.is_null());
    let pps = std_pps();
    assert_eq!(pps.flags.deblocking_filter_control_present_flag(), 1);
    assert_eq!(pps.flags.entropy_coding_mode_flag(), 0);
    let pic = std_picture_info();
    assert_eq!(
        (
            pic.flags.IdrPicFlag(),
            pic.flags.is_intra(),
            pic.flags.is_reference()
        ),
        (1, 1, 1)
    );
}
