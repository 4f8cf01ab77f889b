#!/usr/bin/env bash
# Installs the Debian packages quarry builds and tests with (when root), else prints the apt command.
# libvulkan-dev also provides /usr/share/vulkan/registry/vk.xml, which codegen and its freshness test
# (codegen/tests/regen.rs, failing under CI without it) read.
set -euo pipefail
pkgs=(mesa-vulkan-drivers libvulkan1 libvulkan-dev vulkan-tools vulkan-validationlayers glslang-tools
      spirv-tools xvfb xauth libgl1 libegl1 libxkbcommon-x11-0 libxcursor1 libxrandr2 libxi6 pkg-config
      glmark2-x11 xdotool
      # The real-programs tier (tests/tests/real_programs.rs): D3D12 through vkd3d, ffmpeg's Vulkan
      # filters (libplacebo among them), GL query programs on Zink.
      vkd3d-demos ffmpeg piglit)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "quarry needs these Debian packages: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
