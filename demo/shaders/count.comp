#version 450
// Every invocation bumps one counter, so the buffer holds the invocation count
// the pipeline-statistics query should report.
layout(local_size_x = 8, local_size_y = 4, local_size_z = 1) in;
layout(std430, set = 0, binding = 0) buffer Counter { uint count; } counter;
void main() {
    atomicAdd(counter.count, 1u);
}
