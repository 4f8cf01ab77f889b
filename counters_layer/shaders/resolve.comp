#version 450
// VK_LAYER_QUARRY_counters: turns the raw 64-bit results of a performance query's internal queries
// into the counter values vkGetQueryPoolResults would return (vkCmdCopyQueryPoolResults path).
// One invocation per (query, counter). 64-bit values are uvec2 (lo, hi) so neither shaderInt64 nor
// shaderFloat64 is needed. The arithmetic mirrors counters::ticks_to_ns / counters::scale_ticks in
// the layer exactly (unit-tested there); change both together.
// Regenerate resolve.comp.spv with ./build.sh.
layout(local_size_x = 64) in;

// Word offsets into `w`; 64-bit values are two words, low first.
layout(push_constant) uniform P {
    uint first;      // first query of the copy
    uint count;      // queries in the copy
    uint n;          // counters per query
    uint ts_off;     // timestamps: ts_slots per query
    uint ts_slots;
    uint stats_off;  // pipeline statistics: nstats per query
    uint nstats;
    uint occ_off;    // occlusion: one per query
    uint meta_off;   // render pass instances measured, one word per query
    uint out_off;    // results: n per query
    uint valid_bits; // timestamp valid bits of the queue family
    uint period_m;   // timestampPeriod = period_m * 2^period_s exactly
    int period_s;
    uint rp_slots;   // most render pass instances measured per query
} pc;

// The counter program (one word per counter, at word 0): kind | (statistic index << 8).
layout(std430, set = 0, binding = 0) buffer B { uint w[]; };

const uint CB_DURATION = 0u;
const uint RP_DURATION = 1u;
const uint STATISTIC = 2u;
const uint SAMPLES = 3u;

uvec2 load64(uint word) { return uvec2(w[word], w[word + 1u]); }

uint limb(uvec3 r, int i) {
    if (i == 0) return r.x;
    if (i == 1) return r.y;
    if (i == 2) return r.z;
    return 0u;
}

// (end - begin) mod 2^valid_bits
uvec2 ticks(uvec2 b, uvec2 e) {
    uint borrow;
    uint lo = usubBorrow(e.x, b.x, borrow);
    uint hi = e.y - b.y - borrow;
    uint bits = pc.valid_bits;
    if (bits < 32u) {
        lo &= (1u << bits) - 1u;
        hi = 0u;
    } else if (bits < 64u) {
        hi &= (1u << (bits - 32u)) - 1u;
    }
    return uvec2(lo, hi);
}

// round-half-up(t * period_m * 2^period_s), low 64 bits
uvec2 scale(uvec2 t) {
    uint m = pc.period_m;
    uint h0, l0, h1, l1;
    umulExtended(t.x, m, h0, l0);
    umulExtended(t.y, m, h1, l1);
    uint c;
    uint r1 = uaddCarry(h0, l1, c);
    uvec3 r = uvec3(l0, r1, h1 + c);
    int s = pc.period_s;
    if (s >= 0) {
        if (s >= 64) return uvec2(0u);
        int ls = s / 32;
        int bs = s % 32;
        uvec2 o;
        for (int j = 0; j < 2; j++) {
            uint v = limb(r, j - ls) << bs;
            if (bs > 0 && j - ls - 1 >= 0) v |= limb(r, j - ls - 1) >> (32 - bs);
            o[j] = v;
        }
        return o;
    }
    int k = -s;
    if (k >= 96) return uvec2(0u);
    // + 2^(k-1)
    int rb = k - 1;
    int rl = rb / 32;
    uint add = 1u << (rb % 32);
    uint c0, c1;
    if (rl == 0) {
        r.x = uaddCarry(r.x, add, c0);
        r.y = uaddCarry(r.y, c0, c1);
        r.z += c1;
    } else if (rl == 1) {
        r.y = uaddCarry(r.y, add, c1);
        r.z += c1;
    } else {
        r.z += add;
    }
    int ls = k / 32;
    int bs = k % 32;
    uvec2 o;
    for (int j = 0; j < 2; j++) {
        uint v = limb(r, j + ls) >> bs;
        if (bs > 0) v |= limb(r, j + ls + 1) << (32 - bs);
        o[j] = v;
    }
    return o;
}

uvec2 add64(uvec2 a, uvec2 b) {
    uint c;
    uint lo = uaddCarry(a.x, b.x, c);
    return uvec2(lo, a.y + b.y + c);
}

uvec2 duration(uint q, uint slot) {
    uint base = pc.ts_off + 2u * (q * pc.ts_slots + slot);
    return scale(ticks(load64(base), load64(base + 2u)));
}

void main() {
    uint idx = gl_GlobalInvocationID.x;
    if (idx >= pc.count * pc.n) return;
    uint q = pc.first + idx / pc.n;
    uint k = idx % pc.n;
    uint prog = w[k];
    uint kind = prog & 0xffu;
    uint stat = prog >> 8;
    uvec2 v = uvec2(0u);
    if (kind == CB_DURATION) {
        v = duration(q, 0u);
    } else if (kind == RP_DURATION) {
        uint rp = min(w[pc.meta_off + q], pc.rp_slots);
        for (uint i = 0u; i < rp; i++) v = add64(v, duration(q, 2u + 2u * i));
    } else if (kind == STATISTIC) {
        v = load64(pc.stats_off + 2u * (q * pc.nstats + stat));
    } else if (kind == SAMPLES) {
        v = load64(pc.occ_off + 2u * q);
    }
    uint o = pc.out_off + 2u * (q * pc.n + k);
    w[o] = v.x;
    w[o + 1u] = v.y;
}
