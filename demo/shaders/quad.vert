#version 450
// Positions come straight from the vertex buffer (clip space, w = 1) so that
// covered pixel counts can be computed on the host.
layout(location = 0) in vec4 in_pos;
void main() {
    gl_Position = in_pos;
}
