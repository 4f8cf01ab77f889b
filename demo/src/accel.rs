//! Acceleration-structure property queries: one bottom-level structure
//! (a single triangle, built with ALLOW_COMPACTION) and one top-level
//! structure with a single instance of it. Built once; the properties are
//! written with vkCmdWriteAccelerationStructuresPropertiesKHR every frame.

use crate::gpu::{Buffer, Gpu};
use crate::report::{Report, Rule};
use anyhow::{Context as _, Result};
use ash::vk;

/// Serialized header: driver UUID, compatibility UUID, serialized size,
/// deserialized size, handle count (spec "Serialization format").
const SERIAL_HEADER: u64 = 16 + 16 + 8 + 8 + 8;

struct Built {
    accel: vk::AccelerationStructureKHR,
    buffer: Buffer,
    /// accelerationStructureSize from vkGetAccelerationStructureBuildSizesKHR.
    size: u64,
}

pub struct Accel {
    blas: Built,
    tlas: Built,
    inputs: Vec<Buffer>,
    compacted: vk::QueryPool,
    serial: vk::QueryPool,
    /// SIZE and BOTTOM_LEVEL_POINTERS pools (VK_KHR_ray_tracing_maintenance1).
    rtm1: Option<(vk::QueryPool, vk::QueryPool)>,
}

fn address(gpu: &Gpu, b: &Buffer) -> vk::DeviceAddress {
    unsafe {
        gpu.device
            .get_buffer_device_address(&vk::BufferDeviceAddressInfo::default().buffer(b.buffer))
    }
}

fn build_barrier(d: &ash::Device, cb: vk::CommandBuffer) {
    let mb = [vk::MemoryBarrier2::default()
        .src_stage_mask(vk::PipelineStageFlags2::ACCELERATION_STRUCTURE_BUILD_KHR)
        .src_access_mask(vk::AccessFlags2::ACCELERATION_STRUCTURE_WRITE_KHR)
        .dst_stage_mask(vk::PipelineStageFlags2::ACCELERATION_STRUCTURE_BUILD_KHR)
        .dst_access_mask(vk::AccessFlags2::ACCELERATION_STRUCTURE_READ_KHR)];
    unsafe { d.cmd_pipeline_barrier2(cb, &vk::DependencyInfo::default().memory_barriers(&mb)) };
}

impl Accel {
    pub fn new(gpu: &Gpu, report: &mut Report) -> Result<Option<Self>> {
        let Some(asx) = &gpu.accel_fn else {
            report.skip(
                "acceleration-structure queries",
                "VK_KHR_acceleration_structure (accelerationStructure, bufferDeviceAddress)",
            );
            return Ok(None);
        };
        let mut props = vk::PhysicalDeviceAccelerationStructurePropertiesKHR::default();
        let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut props);
        unsafe {
            gpu.instance
                .get_physical_device_properties2(gpu.pdev, &mut p2)
        };
        let scratch_align = u64::from(
            props
                .min_acceleration_structure_scratch_offset_alignment
                .max(1),
        );
        let input_usage = vk::BufferUsageFlags::ACCELERATION_STRUCTURE_BUILD_INPUT_READ_ONLY_KHR
            | vk::BufferUsageFlags::SHADER_DEVICE_ADDRESS;

        let verts: [f32; 9] = [-0.5, -0.5, 0.0, 0.5, -0.5, 0.0, 0.0, 0.5, 0.0];
        let vbuf = gpu.buffer(36, input_usage, "blas vertices")?;
        vbuf.write(&verts);
        let triangles = vk::AccelerationStructureGeometryTrianglesDataKHR::default()
            .vertex_format(vk::Format::R32G32B32_SFLOAT)
            .vertex_data(vk::DeviceOrHostAddressConstKHR {
                device_address: address(gpu, &vbuf),
            })
            .vertex_stride(12)
            .max_vertex(2)
            .index_type(vk::IndexType::NONE_KHR);
        let blas_geom = [vk::AccelerationStructureGeometryKHR::default()
            .geometry_type(vk::GeometryTypeKHR::TRIANGLES)
            .geometry(vk::AccelerationStructureGeometryDataKHR { triangles })
            .flags(vk::GeometryFlagsKHR::OPAQUE)];
        let blas = Self::build(
            gpu,
            asx,
            vk::AccelerationStructureTypeKHR::BOTTOM_LEVEL,
            &blas_geom,
            vk::BuildAccelerationStructureFlagsKHR::ALLOW_COMPACTION,
            scratch_align,
            "blas",
        )?;

        let blas_addr = unsafe {
            asx.get_acceleration_structure_device_address(
                &vk::AccelerationStructureDeviceAddressInfoKHR::default()
                    .acceleration_structure(blas.accel),
            )
        };
        let instance = vk::AccelerationStructureInstanceKHR {
            transform: vk::TransformMatrixKHR {
                matrix: [1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0],
            },
            instance_custom_index_and_mask: vk::Packed24_8::new(0, 0xff),
            instance_shader_binding_table_record_offset_and_flags: vk::Packed24_8::new(0, 0),
            acceleration_structure_reference: vk::AccelerationStructureReferenceKHR {
                device_handle: blas_addr,
            },
        };
        let ibuf = gpu.buffer(
            std::mem::size_of::<vk::AccelerationStructureInstanceKHR>() as u64,
            input_usage,
            "tlas instances",
        )?;
        ibuf.write(&[instance]);
        let instances = vk::AccelerationStructureGeometryInstancesDataKHR::default()
            .array_of_pointers(false)
            .data(vk::DeviceOrHostAddressConstKHR {
                device_address: address(gpu, &ibuf),
            });
        let tlas_geom = [vk::AccelerationStructureGeometryKHR::default()
            .geometry_type(vk::GeometryTypeKHR::INSTANCES)
            .geometry(vk::AccelerationStructureGeometryDataKHR { instances })];
        let tlas = Self::build(
            gpu,
            asx,
            vk::AccelerationStructureTypeKHR::TOP_LEVEL,
            &tlas_geom,
            vk::BuildAccelerationStructureFlagsKHR::empty(),
            scratch_align,
            "tlas",
        )?;

        let pool = |ty, n, name: &str| gpu.query_pool(ty, n, Default::default(), name);
        let compacted = pool(
            vk::QueryType::ACCELERATION_STRUCTURE_COMPACTED_SIZE_KHR,
            1,
            "as compacted size",
        )?;
        let serial = pool(
            vk::QueryType::ACCELERATION_STRUCTURE_SERIALIZATION_SIZE_KHR,
            2,
            "as serialization size",
        )?;
        let rtm1 = if gpu.support.rt_maintenance1 {
            Some((
                pool(vk::QueryType::ACCELERATION_STRUCTURE_SIZE_KHR, 2, "as size")?,
                pool(
                    vk::QueryType::ACCELERATION_STRUCTURE_SERIALIZATION_BOTTOM_LEVEL_POINTERS_KHR,
                    2,
                    "as bottom-level pointers",
                )?,
            ))
        } else {
            report.skip(
                "acceleration-structure size and bottom-level pointer queries",
                "VK_KHR_ray_tracing_maintenance1",
            );
            None
        };
        Ok(Some(Accel {
            blas,
            tlas,
            inputs: vec![vbuf, ibuf],
            compacted,
            serial,
            rtm1,
        }))
    }

    fn build(
        gpu: &Gpu,
        asx: &ash::khr::acceleration_structure::Device,
        ty: vk::AccelerationStructureTypeKHR,
        geoms: &[vk::AccelerationStructureGeometryKHR],
        flags: vk::BuildAccelerationStructureFlagsKHR,
        scratch_align: u64,
        name: &str,
    ) -> Result<Built> {
        let mut info = vk::AccelerationStructureBuildGeometryInfoKHR::default()
            .ty(ty)
            .flags(flags)
            .mode(vk::BuildAccelerationStructureModeKHR::BUILD)
            .geometries(geoms);
        let mut sizes = vk::AccelerationStructureBuildSizesInfoKHR::default();
        unsafe {
            asx.get_acceleration_structure_build_sizes(
                vk::AccelerationStructureBuildTypeKHR::DEVICE,
                &info,
                &[1],
                &mut sizes,
            )
        };
        let buffer = gpu.buffer(
            sizes.acceleration_structure_size,
            vk::BufferUsageFlags::ACCELERATION_STRUCTURE_STORAGE_KHR
                | vk::BufferUsageFlags::SHADER_DEVICE_ADDRESS,
            name,
        )?;
        let accel = unsafe {
            asx.create_acceleration_structure(
                &vk::AccelerationStructureCreateInfoKHR::default()
                    .buffer(buffer.buffer)
                    .size(sizes.acceleration_structure_size)
                    .ty(ty),
                None,
            )
        }
        .with_context(|| format!("vkCreateAccelerationStructureKHR ({name})"))?;
        gpu.name_object(accel, name);
        let scratch = gpu.buffer(
            sizes.build_scratch_size + scratch_align,
            vk::BufferUsageFlags::STORAGE_BUFFER | vk::BufferUsageFlags::SHADER_DEVICE_ADDRESS,
            &format!("{name} scratch"),
        )?;
        let base = address(gpu, &scratch);
        let aligned = base.div_ceil(scratch_align) * scratch_align;
        info = info
            .dst_acceleration_structure(accel)
            .scratch_data(vk::DeviceOrHostAddressKHR {
                device_address: aligned,
            });
        let range = [vk::AccelerationStructureBuildRangeInfoKHR::default().primitive_count(1)];
        let cb = gpu.record(|d, cb| unsafe {
            asx.cmd_build_acceleration_structures(cb, &[info], &[&range]);
            build_barrier(d, cb);
            Ok(())
        })?;
        gpu.submit_wait(cb)?;
        scratch.destroy(&gpu.device);
        Ok(Built {
            accel,
            buffer,
            size: sizes.acceleration_structure_size,
        })
    }

    pub fn frame(&self, gpu: &Gpu, report: &mut Report) -> Result<()> {
        let Some(asx) = &gpu.accel_fn else {
            return Ok(());
        };
        let both = [self.blas.accel, self.tlas.accel];
        let cb = gpu.record(|d, cb| unsafe {
            d.cmd_reset_query_pool(cb, self.compacted, 0, 1);
            d.cmd_reset_query_pool(cb, self.serial, 0, 2);
            if let Some((size, ptrs)) = self.rtm1 {
                d.cmd_reset_query_pool(cb, size, 0, 2);
                d.cmd_reset_query_pool(cb, ptrs, 0, 2);
            }
            build_barrier(d, cb);
            asx.cmd_write_acceleration_structures_properties(
                cb,
                &[self.blas.accel],
                vk::QueryType::ACCELERATION_STRUCTURE_COMPACTED_SIZE_KHR,
                self.compacted,
                0,
            );
            asx.cmd_write_acceleration_structures_properties(
                cb,
                &both,
                vk::QueryType::ACCELERATION_STRUCTURE_SERIALIZATION_SIZE_KHR,
                self.serial,
                0,
            );
            if let Some((size, ptrs)) = self.rtm1 {
                asx.cmd_write_acceleration_structures_properties(
                    cb,
                    &both,
                    vk::QueryType::ACCELERATION_STRUCTURE_SIZE_KHR,
                    size,
                    0,
                );
                asx.cmd_write_acceleration_structures_properties(
                    cb,
                    &both,
                    vk::QueryType::ACCELERATION_STRUCTURE_SERIALIZATION_BOTTOM_LEVEL_POINTERS_KHR,
                    ptrs,
                    0,
                );
            }
            Ok(())
        })?;
        gpu.submit_wait(cb)?;
        let compacted = gpu.results64(self.compacted, 0, 1, 1)?[0];
        report.value(
            "acceleration structure: BLAS compacted size",
            compacted,
            Rule::Range(1, self.blas.size),
            "non-zero, no larger than the uncompacted build size",
        );
        let serial = gpu.results64(self.serial, 0, 2, 1)?;
        report.value(
            "acceleration structure: BLAS serialization size",
            serial[0],
            Rule::AtLeast(SERIAL_HEADER),
            "spec serialization header is 56 bytes",
        );
        report.value(
            "acceleration structure: TLAS serialization size",
            serial[1],
            Rule::AtLeast(SERIAL_HEADER + 8),
            "header plus one 8-byte bottom-level handle",
        );
        if let Some((size, ptrs)) = self.rtm1 {
            let s = gpu.results64(size, 0, 2, 1)?;
            report.value(
                "acceleration structure: BLAS size",
                s[0],
                Rule::Range(1, self.blas.size),
                "no larger than accelerationStructureSize of the build",
            );
            report.value(
                "acceleration structure: TLAS size",
                s[1],
                Rule::Range(1, self.tlas.size),
                "no larger than accelerationStructureSize of the build",
            );
            let p = gpu.results64(ptrs, 0, 2, 1)?;
            report.value(
                "acceleration structure: BLAS bottom-level pointers",
                p[0],
                Rule::Exact(0),
                "a bottom-level structure references none",
            );
            report.value(
                "acceleration structure: TLAS bottom-level pointers",
                p[1],
                Rule::Exact(1),
                "one instance of one BLAS",
            );
        }
        Ok(())
    }

    pub fn destroy(&self, gpu: &Gpu) {
        let d = &gpu.device;
        unsafe {
            if let Some(asx) = &gpu.accel_fn {
                asx.destroy_acceleration_structure(self.tlas.accel, None);
                asx.destroy_acceleration_structure(self.blas.accel, None);
            }
            d.destroy_query_pool(self.compacted, None);
            d.destroy_query_pool(self.serial, None);
            if let Some((a, b)) = self.rtm1 {
                d.destroy_query_pool(a, None);
                d.destroy_query_pool(b, None);
            }
        }
        self.tlas.buffer.destroy(d);
        self.blas.buffer.destroy(d);
        for b in &self.inputs {
            b.destroy(d);
        }
    }
}
