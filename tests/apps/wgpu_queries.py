"""A wgpu (wgpu-native) program that never presents: it renders off-screen and reads occlusion and
timestamp queries back through resolve + buffer copies, the way wgpu apps do. Used to capture an app
we did not write (wgpu sub-allocates its memory and resolves queries with vkCmdCopyQueryPoolResults).

Prints one line per frame: `frame N samples A B timestamps_ok T` so a test can check the answers.
`--shared-resolve` resolves the timestamps into the same bytes the occlusion results were resolved to
(after copying those out), as apps that reuse one resolve buffer within a submission do."""

import sys

import wgpu

ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
FRAMES = int(ARGS[0]) if ARGS else 5
SHARED = "--shared-resolve" in sys.argv
TS_AT = 0 if SHARED else 256
W, H = 64, 64

SHADER = """
struct Out { @builtin(position) pos: vec4<f32> };
@vertex fn vs(@builtin(vertex_index) i: u32, @builtin(instance_index) k: u32) -> Out {
    // Two full-height triangles: instance 0 covers the left half, instance 1 a quarter.
    var xs = array<f32, 3>(-1.0, 0.0, -1.0);
    var ys = array<f32, 3>(-1.0, -1.0, 3.0);
    let scale = select(1.0, 0.5, k == 1u);
    var o: Out;
    o.pos = vec4<f32>((xs[i] + 1.0) * scale * 2.0 - 1.0, ys[i], 0.0, 1.0);
    return o;
}
@fragment fn fs() -> @location(0) vec4<f32> { return vec4<f32>(1.0, 0.5, 0.0, 1.0); }
"""


def main():
    adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    want = ["timestamp-query"] if "timestamp-query" in adapter.features else []
    device = adapter.request_device_sync(required_features=want)
    module = device.create_shader_module(code=SHADER)
    pipeline = device.create_render_pipeline(
        layout="auto",
        vertex={"module": module, "entry_point": "vs"},
        fragment={"module": module, "entry_point": "fs", "targets": [{"format": "rgba8unorm"}]},
        primitive={"topology": "triangle-list"},
        depth_stencil={"format": "depth24plus", "depth_write_enabled": False, "depth_compare": "always"},
    )
    color = device.create_texture(size=(W, H, 1), format="rgba8unorm",
                                  usage=wgpu.TextureUsage.RENDER_ATTACHMENT | wgpu.TextureUsage.COPY_SRC)
    depth = device.create_texture(size=(W, H, 1), format="depth24plus",
                                  usage=wgpu.TextureUsage.RENDER_ATTACHMENT)
    occ = device.create_query_set(type="occlusion", count=2)
    ts = device.create_query_set(type="timestamp", count=2) if want else None
    resolve = device.create_buffer(size=512, usage=wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC)
    readback = device.create_buffer(size=256, usage=wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST)
    for frame in range(FRAMES):
        enc = device.create_command_encoder()
        desc = {
            "color_attachments": [{"view": color.create_view(), "load_op": "clear", "store_op": "store",
                                   "clear_value": (0, 0, 0, 1)}],
            "depth_stencil_attachment": {"view": depth.create_view(), "depth_load_op": "clear",
                                         "depth_store_op": "store", "depth_clear_value": 1.0},
            "occlusion_query_set": occ,
        }
        if ts is not None:
            desc["timestamp_writes"] = {"query_set": ts, "beginning_of_pass_write_index": 0,
                                        "end_of_pass_write_index": 1}
        rp = enc.begin_render_pass(**desc)
        rp.set_pipeline(pipeline)
        for k in range(2):
            rp.begin_occlusion_query(k)
            rp.draw(3, 1, 0, k)
            rp.end_occlusion_query()
        rp.end()
        enc.resolve_query_set(occ, 0, 2, resolve, 0)
        enc.copy_buffer_to_buffer(resolve, 0, readback, 0, 16)
        if ts is not None:
            enc.resolve_query_set(ts, 0, 2, resolve, TS_AT)
            enc.copy_buffer_to_buffer(resolve, TS_AT, readback, 16, 16)
        device.queue.submit([enc.finish()])
        readback.map_sync(wgpu.MapMode.READ)
        data = readback.read_mapped()
        readback.unmap()
        a = int.from_bytes(data[0:8], "little")
        b = int.from_bytes(data[8:16], "little")
        t0 = int.from_bytes(data[16:24], "little")
        t1 = int.from_bytes(data[24:32], "little")
        print(f"frame {frame} samples {a} {b} timestamps_ok {int(ts is None or t1 >= t0)}", flush=True)


main()
