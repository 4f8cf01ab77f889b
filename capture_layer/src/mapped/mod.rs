//! Finding what the host wrote into a mapping: `track` picks per mapping between write protection
//! (`uffd`: the kernel lists the written pages) and a shadow compare, and returns (offset, bytes)
//! runs. A leaf: it knows nothing of Vulkan, the device state or the trace writer; `memory` (the
//! hooks) and `state` (which holds a `Track` per mapping) call it.

pub mod track;
pub mod uffd;
