"""Taichi on its Vulkan backend (tests/tests/real_programs_compute.rs).

Taichi probes Vulkan with an instance of its own ("Checking Vulkan Device"), destroys it, then
creates the instance it works with. Each step fills a field and sums it (exact in f32: halves under
2^23, whatever the order of the reduction); the kernel profiler times every kernel launch with
timestamp queries and prints its table at the end.

Usage: taichi_steps.py [STEPS]
"""
import sys

import taichi as ti

ti.init(arch=ti.vulkan, kernel_profiler=True, offline_cache=False)
n = 4096
x = ti.field(ti.f32, shape=n)


@ti.kernel
def fill(k: ti.i32):
    for i in x:
        x[i] = (i % 97) * 0.5 + k


@ti.kernel
def total() -> ti.f32:
    s = 0.0
    for i in x:
        s += x[i]
    return s


for k in range(int(sys.argv[1]) if len(sys.argv) > 1 else 8):
    fill(k)
    print("step", k, "sum", total())
ti.sync()
ti.profiler.print_kernel_profiler_info("count")
