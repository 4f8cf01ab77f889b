//! The H.264 bitstream writer: exp-Golomb codes, emulation prevention and
//! one IDR slice of I_PCM macroblocks (ITU-T H.264 7.3.3, 7.3.5, 9.1).

/// MSB-first bit writer for RBSP data.
#[derive(Default)]
pub struct BitWriter {
    pub bytes: Vec<u8>,
    acc: u8,
    n: u32,
}

impl BitWriter {
    pub fn bit(&mut self, b: bool) {
        self.acc = (self.acc << 1) | u8::from(b);
        self.n += 1;
        if self.n == 8 {
            self.bytes.push(self.acc);
            self.acc = 0;
            self.n = 0;
        }
    }

    /// u(n): `bits` low bits of `v`, most significant first.
    pub fn u(&mut self, bits: u32, v: u32) {
        for i in (0..bits).rev() {
            self.bit((v >> i) & 1 == 1);
        }
    }

    /// ue(v): unsigned exp-Golomb.
    pub fn ue(&mut self, v: u32) {
        let x = u64::from(v) + 1;
        let len = 64 - x.leading_zeros();
        for _ in 1..len {
            self.bit(false);
        }
        for i in (0..len).rev() {
            self.bit((x >> i) & 1 == 1);
        }
    }

    /// se(v): signed exp-Golomb (positive k -> 2k-1, negative -> -2k).
    pub fn se(&mut self, v: i32) {
        let m = if v > 0 {
            2 * v.unsigned_abs() - 1
        } else {
            2 * v.unsigned_abs()
        };
        self.ue(m);
    }

    pub fn aligned(&self) -> bool {
        self.n == 0
    }

    /// Bits written since the last full byte.
    #[cfg(test)]
    pub fn pending_bits(&self) -> u32 {
        self.n
    }

    /// Zero bits up to the next byte boundary.
    pub fn align_zero(&mut self) {
        while !self.aligned() {
            self.bit(false);
        }
    }

    /// rbsp_trailing_bits: a stop bit, then zero bits to the boundary.
    pub fn finish(mut self) -> Vec<u8> {
        self.bit(true);
        self.align_zero();
        self.bytes
    }
}

/// Inserts emulation_prevention_three_byte wherever two zero bytes are
/// followed by a byte <= 3, so no start code appears inside a NAL unit.
pub fn escape(rbsp: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(rbsp.len() + rbsp.len() / 64);
    let mut zeros = 0;
    for &b in rbsp {
        if zeros == 2 && b <= 3 {
            out.push(3);
            zeros = 0;
        }
        out.push(b);
        zeros = if b == 0 { zeros + 1 } else { 0 };
    }
    out
}

/// A NAL unit with a three-byte start code (Annex B), as Vulkan H.264
/// decode expects at each slice offset.
pub fn nal(ref_idc: u8, unit_type: u8, rbsp: &[u8]) -> Vec<u8> {
    let mut out = vec![0, 0, 1, (ref_idc & 3) << 5 | (unit_type & 31)];
    out.extend(escape(rbsp));
    out
}

/// mb_type of I_PCM in an I slice (Table 7-11).
pub const I_PCM: u32 = 25;

/// One IDR slice (nal_unit_type 5, nal_ref_idc 3) covering a
/// `w_mbs` x `h_mbs` picture, every macroblock I_PCM with the samples of
/// the given planes (4:2:0, 8-bit). Matches the SPS/PPS of this module's
/// caller: frame_num and POC LSB 4 bits, POC type 0, CAVLC,
/// deblocking_filter_control_present_flag = 1, one slice group.
pub fn idr_slice(w_mbs: u32, h_mbs: u32, luma: &[u8], cb: &[u8], cr: &[u8]) -> Vec<u8> {
    let (w, cw) = (w_mbs as usize * 16, w_mbs as usize * 8);
    let mut b = BitWriter::default();
    b.ue(0); // first_mb_in_slice
    b.ue(7); // slice_type: I, and so are all slices of the picture
    b.ue(0); // pic_parameter_set_id
    b.u(super::LOG2_MAX_FRAME_NUM, 0); // frame_num
    b.ue(0); // idr_pic_id
    b.u(super::LOG2_MAX_POC_LSB, 0); // pic_order_cnt_lsb
    b.bit(false); // no_output_of_prior_pics_flag
    b.bit(false); // long_term_reference_flag
    b.se(0); // slice_qp_delta
    b.ue(1); // disable_deblocking_filter_idc: off
    for my in 0..h_mbs as usize {
        for mx in 0..w_mbs as usize {
            b.ue(I_PCM);
            b.align_zero(); // pcm_alignment_zero_bit
            for y in 0..16 {
                let row = (my * 16 + y) * w + mx * 16;
                for &s in &luma[row..row + 16] {
                    b.u(8, u32::from(s));
                }
            }
            for plane in [cb, cr] {
                for y in 0..8 {
                    let row = (my * 8 + y) * cw + mx * 8;
                    for &s in &plane[row..row + 8] {
                        b.u(8, u32::from(s));
                    }
                }
            }
        }
    }
    nal(3, 5, &b.finish())
}
