#!/bin/sh
# Regenerates the checked-in SPIR-V next to each GLSL source.
# Targets Vulkan 1.2 (SPIR-V 1.5): new enough for GL_EXT_mesh_shader, old
# enough that compute shaders use LocalSize rather than LocalSizeId (which
# would need the maintenance4 feature).
# Needs glslangValidator (Debian: glslang-tools). Run from anywhere.
set -eu
cd "$(dirname "$0")"
for src in *.vert *.frag *.tesc *.tese *.geom *.comp *.task *.mesh; do
    glslangValidator --quiet --target-env vulkan1.2 -o "$src.spv" "$src"
done
for f in ./*.spv; do spirv-val --target-env vulkan1.2 "$f"; done
