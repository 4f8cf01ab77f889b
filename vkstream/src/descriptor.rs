//! What a descriptor of each type holds that names an object, as written in a
//! `VkDescriptorImageInfo`, `VkDescriptorBufferInfo`, texel buffer view or acceleration structure
//! entry: read by the layer's trim tracker and the replayer's template translation alike.

use ash::vk;

/// The handles of one descriptor of type `ty`: (byte offset in its info, object type). Fields a
/// descriptor type ignores (the sampler of a sampled image, the view of a sampler) are left out:
/// apps may leave garbage there. Inline uniform blocks are plain bytes (none).
pub fn handle_fields(ty: vk::DescriptorType) -> &'static [(usize, vk::ObjectType)] {
    const SAMPLER: &[(usize, vk::ObjectType)] = &[(0, vk::ObjectType::SAMPLER)];
    const COMBINED: &[(usize, vk::ObjectType)] = &[
        (0, vk::ObjectType::SAMPLER),
        (8, vk::ObjectType::IMAGE_VIEW),
    ];
    const IMAGE: &[(usize, vk::ObjectType)] = &[(8, vk::ObjectType::IMAGE_VIEW)];
    const BUFFER: &[(usize, vk::ObjectType)] = &[(0, vk::ObjectType::BUFFER)];
    const VIEW: &[(usize, vk::ObjectType)] = &[(0, vk::ObjectType::BUFFER_VIEW)];
    const AS: &[(usize, vk::ObjectType)] = &[(0, vk::ObjectType::ACCELERATION_STRUCTURE_KHR)];
    match ty {
        vk::DescriptorType::SAMPLER => SAMPLER,
        vk::DescriptorType::COMBINED_IMAGE_SAMPLER => COMBINED,
        vk::DescriptorType::SAMPLED_IMAGE
        | vk::DescriptorType::STORAGE_IMAGE
        | vk::DescriptorType::INPUT_ATTACHMENT => IMAGE,
        vk::DescriptorType::UNIFORM_BUFFER
        | vk::DescriptorType::STORAGE_BUFFER
        | vk::DescriptorType::UNIFORM_BUFFER_DYNAMIC
        | vk::DescriptorType::STORAGE_BUFFER_DYNAMIC => BUFFER,
        vk::DescriptorType::UNIFORM_TEXEL_BUFFER | vk::DescriptorType::STORAGE_TEXEL_BUFFER => VIEW,
        vk::DescriptorType::ACCELERATION_STRUCTURE_KHR => AS,
        _ => &[],
    }
}
