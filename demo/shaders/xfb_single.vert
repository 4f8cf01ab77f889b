#version 450
// Single-stream fallback: the vertex shader itself is captured (stream 0).
layout(location = 0) in vec4 in_pos;
layout(location = 0, xfb_buffer = 0, xfb_offset = 0, xfb_stride = 16) out vec4 captured;
void main() {
    captured = in_pos;
    gl_Position = in_pos;
    gl_PointSize = 1.0;
}
