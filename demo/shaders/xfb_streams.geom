#version 450
// Stream s receives s + 1 points per input point, each captured into
// transform-feedback buffer s, so per-stream "needed" counts are known.
layout(points) in;
layout(points, max_vertices = 10) out;
layout(location = 0, stream = 0, xfb_buffer = 0, xfb_offset = 0, xfb_stride = 16) out vec4 s0;
layout(location = 1, stream = 1, xfb_buffer = 1, xfb_offset = 0, xfb_stride = 16) out vec4 s1;
layout(location = 2, stream = 2, xfb_buffer = 2, xfb_offset = 0, xfb_stride = 16) out vec4 s2;
layout(location = 3, stream = 3, xfb_buffer = 3, xfb_offset = 0, xfb_stride = 16) out vec4 s3;
void main() {
    vec4 p = gl_in[0].gl_Position;
    s0 = p; gl_Position = p; EmitStreamVertex(0); EndStreamPrimitive(0);
    for (int i = 0; i < 2; i++) { s1 = p + vec4(float(i)); EmitStreamVertex(1); EndStreamPrimitive(1); }
    for (int i = 0; i < 3; i++) { s2 = p + vec4(float(i)); EmitStreamVertex(2); EndStreamPrimitive(2); }
    for (int i = 0; i < 4; i++) { s3 = p + vec4(float(i)); EmitStreamVertex(3); EndStreamPrimitive(3); }
}
