#!/bin/sh
# Regenerates the checked-in SPIR-V next to the GLSL source (as demo/shaders/build.sh does): glslang is
# not a build dependency, so cargo builds never need it. Targets Vulkan 1.0 (SPIR-V 1.0), the oldest
# any device the layer runs on speaks.
# Needs glslangValidator and spirv-val (Debian: glslang-tools, spirv-tools). Run from anywhere.
set -eu
cd "$(dirname "$0")"
glslangValidator --quiet --target-env vulkan1.0 -o resolve.comp.spv resolve.comp
spirv-val --target-env vulkan1.0 resolve.comp.spv
