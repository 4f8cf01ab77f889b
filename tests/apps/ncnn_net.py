"""ncnn (Tencent's inference framework, PyPI wheel with Vulkan) running a small net on the GPU
(tests/tests/real_programs_compute.rs).

The net is given as text (3x3 convolution over 8 channels, ReLU, 2x2 max pooling) and its weights
are written here from a fixed seed: no model files. Each run feeds a scaled input and prints the
output's shape and sum.

ncnn loads the Vulkan driver itself, bypassing the loader (and so every layer), when
VK_ICD_FILENAMES or VK_DRIVER_FILES is set: run it without them.

Usage: ncnn_net.py WEIGHTS_FILE [RUNS]
"""
import struct
import sys

import ncnn
import numpy as np

PARAM = """7767517
4 4
Input            data     0 1 data 0=32 1=32 2=8
Convolution      conv     1 1 data conv 0=8 1=3 4=1 5=1 6=576
ReLU             relu     1 1 conv relu
Pooling          pool     1 1 relu out 0=0 1=2 2=2
"""

rng = np.random.default_rng(7)
weights = rng.standard_normal(576).astype(np.float32)
bias = rng.standard_normal(8).astype(np.float32)
with open(sys.argv[1], "wb") as f:
    # A zero flag word: the convolution's weights follow as raw float32; the bias has no flag.
    f.write(struct.pack("<I", 0))
    f.write(weights.tobytes())
    f.write(bias.tobytes())

net = ncnn.Net()
net.opt.use_vulkan_compute = True
# fp32 throughout: the sums printed are the same on every run.
for o in ("use_fp16_packed", "use_fp16_storage", "use_fp16_arithmetic", "use_int8_storage"):
    setattr(net.opt, o, False)
net.load_param_mem(PARAM)
net.load_model(sys.argv[1])
x = rng.standard_normal((8, 32, 32)).astype(np.float32)
for i in range(int(sys.argv[2]) if len(sys.argv) > 2 else 4):
    ex = net.create_extractor()
    inp = np.ascontiguousarray(x * (i + 1))  # the Mat borrows this buffer: keep it alive
    m = ncnn.Mat(inp)
    ex.input("data", m)
    ret, out = ex.extract("out")
    a = np.array(out)
    print("run", i, "ret", ret, "shape", a.shape, "sum %.4f" % float(a.sum()))
